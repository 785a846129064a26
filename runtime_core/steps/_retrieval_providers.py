"""Retrieval providers: the interface `rag.retrieval` calls, their registry, and the embedded SQLite one.

Owns the (provider type, provider key) -> provider mapping and the seeded relational source.
Must not shape step results or know about pipelines.

Default mapping: provider type `relational` with provider key `default`, `sqlite`,
`sqlserver` or `postgres` all resolve to one embedded SQLite database created from
`data/seed.sql`. A real SQL Server / PostgreSQL provider replaces an entry with `register`.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from runtime_core.steps._executor import StepFailure

SEED_SQL_PATH = Path(__file__).parent / "data" / "seed.sql"
EMBEDDED_DATABASE_NAME = "retrieval.sqlite3"
EMBEDDED_RELATIONAL_KEYS = ("default", "sqlite", "sqlserver", "postgres")


@runtime_checkable
class RetrievalProvider(Protocol):
    """A data source answering named operations (`candidate.byId`, ...) with JSON values."""

    async def retrieve(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | list[Any]:
        """Return the operation's rows; raise StepFailure(code="not_found"|"permanent"|...)."""
        ...


class RetrievalProviders:
    """Registry of retrieval providers by (provider type, provider key)."""

    def __init__(self) -> None:
        self._providers: dict[tuple[str, str], RetrievalProvider] = {}

    def register(self, provider_type: str, provider_key: str, provider: RetrievalProvider) -> None:
        self._providers[(provider_type, provider_key)] = provider

    def resolve(self, provider_type: str, provider_key: str) -> RetrievalProvider:
        provider = self._providers.get((provider_type, provider_key))
        if provider is None:
            known = ", ".join(f"{kind}/{key}" for kind, key in self.keys()) or "none"
            raise StepFailure(
                f"no retrieval provider registered for {provider_type}/{provider_key} (registered: {known})",
                code="permanent",
            )
        return provider

    def keys(self) -> list[tuple[str, str]]:
        return sorted(self._providers)


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
        lookup = _RELATIONAL_OPERATIONS.get(operation)
        if lookup is None:
            raise StepFailure(
                f"relational provider has no operation {operation!r} (known: {', '.join(self.operations)})",
                code="permanent",
            )
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


def default_retrieval_providers(data_dir: Path | None = None) -> RetrievalProviders:
    """Every embedded relational key bound to one seeded SQLite file (in `data_dir`, or a temp dir)."""
    if data_dir is None:
        embedded = SqliteRelationalProvider.seeded_in_temporary_directory()
    else:
        embedded = SqliteRelationalProvider.seeded(data_dir / EMBEDDED_DATABASE_NAME)
    providers = RetrievalProviders()
    for provider_key in EMBEDDED_RELATIONAL_KEYS:
        providers.register("relational", provider_key, embedded)
    return providers
