"""The embedded relational retrieval source: one SQLite file seeded from `data/seed.sql`.

Owns the demo source that keeps the runtime offline-capable: its two by-id operations and
the seeded file. Registered as `relational/default` and `relational/sqlite` unless the
providers file configures those keys. Must not shape step results or know about pipelines.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.retrieval._operations import operation_spec

SEED_SQL_PATH = Path(__file__).parent / "data" / "seed.sql"
EMBEDDED_DATABASE_NAME = "retrieval.sqlite3"
EMBEDDED_RELATIONAL_KEYS = ("default", "sqlite")
EMBEDDED_PROVIDER_TYPE = "relational"


@dataclass(frozen=True)
class _Lookup:
    """One by-id operation: the parameter it needs, its query and its JSON-array columns."""

    param: str
    query: str
    json_columns: tuple[str, ...]


_RELATIONAL_OPERATIONS: dict[str, _Lookup] = {
    "candidate.byId": _Lookup(
        param="candidateId",
        query=(
            "SELECT id, name, title, years_experience AS yearsExperience, skills, location "
            "FROM candidates WHERE id = ?"
        ),
        json_columns=("skills",),
    ),
    "job.byId": _Lookup(
        param="jobId",
        query=(
            "SELECT id, title, department, min_years AS minYears, required_skills AS requiredSkills, "
            "location FROM jobs WHERE id = ?"
        ),
        json_columns=("requiredSkills",),
    ),
}


class SqliteRelationalProvider:
    """The embedded relational source: one SQLite file, read-only queries run in a thread."""

    operations: tuple[str, ...] = tuple(sorted(_RELATIONAL_OPERATIONS))

    def __init__(self, database_path: Path) -> None:
        self.database_path = database_path.resolve()
        self._temporary_directory: tempfile.TemporaryDirectory[str] | None = None

    @classmethod
    def seeded(cls, database_path: Path) -> SqliteRelationalProvider:
        """Open (creating if missing) the database at `database_path` and apply `seed.sql`."""
        provider = cls(database_path)
        provider.apply_seed()
        return provider

    @classmethod
    def seeded_in_temporary_directory(cls) -> SqliteRelationalProvider:
        """A fresh seeded database in a temporary directory removed with the provider."""
        directory = tempfile.TemporaryDirectory(prefix="mcprt-retrieval-")
        provider = cls.seeded(Path(directory.name) / EMBEDDED_DATABASE_NAME)
        provider._temporary_directory = directory
        return provider

    def apply_seed(self) -> None:
        self.database_path.parent.mkdir(parents=True, exist_ok=True)
        script = SEED_SQL_PATH.read_text(encoding="utf-8")
        with closing(sqlite3.connect(self.database_path, timeout=30)) as connection:
            connection.executescript(script)

    async def retrieve(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        lookup = operation_spec("the embedded relational provider", _RELATIONAL_OPERATIONS, operation)
        key = params.get(lookup.param)
        if not isinstance(key, str | int) or isinstance(key, bool) or key == "":
            raise StepFailure(f"operation {operation!r} needs input {lookup.param!r}", code="permanent")
        row = await asyncio.to_thread(self._fetch_one, lookup, str(key))
        if row is None:
            raise StepFailure(f"{operation}: no row with id {key!r}", code="not_found")
        return row

    def _fetch_one(self, lookup: _Lookup, key: str) -> dict[str, Any] | None:
        uri = f"{self.database_path.as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=30)) as connection:
            connection.row_factory = sqlite3.Row
            row = connection.execute(lookup.query, (key,)).fetchone()
        if row is None:
            return None
        record = dict(row)
        for column in lookup.json_columns:
            record[column] = json.loads(record[column])
        return record
