"""SqliteDurableStore: the embedded default backend, one SQLite file in WAL mode.

Owns the aiosqlite connection, the pragmas that let several processes on one machine share
the file (WAL + busy_timeout), how statements run on it (writes serialized, batches in one
IMMEDIATE transaction that a cancelled caller cannot interrupt) and its purge statements; the
queries are SqlDurableStore's. Keeps aiosqlite's DEBUG records (every statement with its
parameters: tenant ids, run ids, payload bodies) out of the logs, whatever the root level.
Must not know about Redis, queues or executions beyond the rows it is handed.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import aiosqlite

from runtime_core.errors import StoreUnavailableError
from runtime_core.storage._models import DurableRecordKind
from runtime_core.storage._query import SQLITE
from runtime_core.storage._sql_store import Params, SqlDurableStore
from runtime_core.storage._sql_tables import RecordTable
from runtime_core.storage._sqlite_schema import SCHEMA, TABLES

logging.getLogger("aiosqlite").setLevel(logging.INFO)


def _unavailable(path: Path, exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(
        f"SQLite durable store {path} is unavailable: {exc}",
        hint="Check the data directory exists, is writable and is not on a network filesystem.",
    )


def _oldest_rows(table: str, row_key: str, age_column: str) -> str:
    """Delete the `limit` oldest rows of `table` older than a cutoff (params: cutoff, limit)."""
    return (
        f"DELETE FROM {table} WHERE {row_key} IN "
        f"(SELECT {row_key} FROM {table} WHERE {age_column} < ? ORDER BY {age_column} LIMIT ?)"
    )


_EXECUTION_REPLAY_MATERIAL = ("payloads", "archived_steps", "snapshots")


class SqliteDurableStore(SqlDurableStore):
    """DurableStore over one SQLite file; safe to open from several processes at once."""

    _dialect = SQLITE
    _tables = TABLES
    _purge_statements = {
        DurableRecordKind.LEDGER: (_oldest_rows("ledger", "row_id", "recorded_at"),),
        DurableRecordKind.TRACE: (_oldest_rows("trace_spans", "rowid", "end_ns"),),
        DurableRecordKind.FORENSICS: (_oldest_rows("forensics", "row_id", "recorded_at"),),
        DurableRecordKind.RUN_RECORDS: (
            _oldest_rows("run_records", "shared_run_id", "ended_at"),
            _oldest_rows("run_index_history", "row_id", "recorded_at"),
            _oldest_rows("submitted_runs", "shared_run_id", "submitted_at"),
        ),
    }

    def __init__(self, path: Path, connection: aiosqlite.Connection) -> None:
        self._path = path
        self._db = connection
        self._write_lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, path: Path, busy_timeout_ms: int = 5000) -> SqliteDurableStore:
        """Open (creating the file, folders and tables if needed) the store at `path`."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            connection = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise _unavailable(path, exc) from exc
        try:
            await cls._prepare(connection, busy_timeout_ms)
        except sqlite3.Error as exc:
            await connection.close()
            raise _unavailable(path, exc) from exc
        return cls(path, connection)

    @staticmethod
    async def _prepare(connection: aiosqlite.Connection, busy_timeout_ms: int) -> None:
        connection.row_factory = sqlite3.Row
        await connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        await connection.execute("PRAGMA journal_mode = WAL")
        await connection.execute("PRAGMA synchronous = NORMAL")
        await connection.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")

    @property
    def path(self) -> Path:
        return self._path

    # Plumbing

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        if self._closed:
            raise _unavailable(self._path, RuntimeError("the store was closed"))
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise _unavailable(self._path, exc) from exc

    async def _write(self, sql: str, params: Params) -> int:
        async with self._guard(), self._write_lock:
            cursor = await self._db.execute(sql, params)
            return cursor.rowcount

    async def _insert_batch(self, table: RecordTable[Any], records: list[Any], conflict_key: str) -> None:
        # INSERT OR IGNORE: a row meeting `conflict_key` (the table's unique key) is skipped.
        await self._write_statements([(table.insert_sql(), [table.to_row(record) for record in records])])

    async def _write_statements(self, statements: Sequence[tuple[str, Sequence[Params]]]) -> None:
        # Shielded: a cancelled caller gets its CancelledError at once, but cannot stop the batch
        # between BEGIN and COMMIT, which would leave the shared connection inside a transaction.
        async with self._guard():
            await asyncio.shield(self._transaction(statements))

    async def _transaction(self, statements: Sequence[tuple[str, Sequence[Params]]]) -> None:
        """Run every statement over its rows in one IMMEDIATE transaction: committed or rolled back."""
        async with self._write_lock:
            try:
                await self._db.execute("BEGIN IMMEDIATE")
                for sql, rows in statements:
                    await self._db.executemany(sql, rows)
                await self._db.execute("COMMIT")
            except BaseException:
                await self._rollback()
                raise

    async def _rollback(self) -> None:
        # aiosqlite runs every queued statement even if its awaiter was cancelled, so this runs
        # after a BEGIN whose await was interrupted; it fails harmlessly if no transaction is open.
        with suppress(sqlite3.OperationalError):
            await self._db.execute("ROLLBACK")

    async def _fetch_all(self, sql: str, params: Params) -> list[sqlite3.Row]:
        # One call on aiosqlite's thread, so a cancelled reader never leaves a half-read cursor.
        async with self._guard():
            return list(await self._db.execute_fetchall(sql, params))

    async def _purge_snapshots(self, cutoff: str, limit: int) -> int:
        rows = await self._fetch_all(
            "SELECT tenant_id, execution_id FROM snapshots WHERE created_at < ? ORDER BY created_at LIMIT ?",
            (cutoff, limit),
        )
        executions = [(row["tenant_id"], row["execution_id"]) for row in rows]
        if executions:
            await self._write_statements(
                [
                    (f"DELETE FROM {table} WHERE tenant_id = ? AND execution_id = ?", executions)
                    for table in _EXECUTION_REPLAY_MATERIAL
                ]
            )
        return len(executions)

    # Lifecycle

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            async with self._write_lock:  # a shielded batch may outlive its cancelled caller
                await self._db.close()
