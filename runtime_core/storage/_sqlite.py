"""SqliteDurableStore: the embedded default backend, one SQLite file in WAL mode.

Owns the pragmas that let several processes on one machine share the file (WAL +
busy_timeout), how statements run on its connections (reads one call each on the
connection's thread, SqliteThread; writes through GroupCommit, which commits the writes queued
while a transaction is in flight together, in one IMMEDIATE transaction a cancelled caller
cannot interrupt: on the event loop's own write connection when the file is free, else on
the thread's) and its purge statements; the queries are SqlDurableStore's. Logs no
statement or parameter (tenant ids, run ids, payload bodies). Must not know about Redis, queues
or executions beyond the rows it is handed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from runtime_core.errors import StoreUnavailableError
from runtime_core.storage._query import SQLITE
from runtime_core.storage._sql_store import Params, SqlDurableStore, purge_statements
from runtime_core.storage._sql_tables import RecordTable
from runtime_core.storage._sqlite_commits import GroupCommit, Statements
from runtime_core.storage._sqlite_schema import SCHEMA, TABLES
from runtime_core.storage._sqlite_thread import SqliteThread


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


def _connect_at_once(path: Path) -> sqlite3.Connection:
    """The event loop's write connection (used only there): it never waits for a lock (busy
    timeout 0) and never checkpoints the WAL, so a commit on it never blocks the loop."""
    connection = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        connection.close()
        raise
    return connection


_EXECUTION_REPLAY_MATERIAL = ("payloads", "archived_steps", "snapshots")


class SqliteDurableStore(SqlDurableStore):
    """DurableStore over one SQLite file; safe to open from several processes at once."""

    _dialect = SQLITE
    _tables = TABLES
    _purge_statements = purge_statements(_oldest_rows, "rowid")

    def __init__(self, path: Path, thread: SqliteThread, at_once: sqlite3.Connection) -> None:
        self._path = path
        self._thread = thread
        self._writes = GroupCommit(thread, at_once)
        self._closed = False

    @classmethod
    async def open(cls, path: Path, busy_timeout_ms: int = 5000) -> SqliteDurableStore:
        """Open (creating the file, folders and tables if needed) the store at `path`."""

        def prepare(connection: sqlite3.Connection) -> None:
            connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            thread = await SqliteThread.open(path, prepare)
        except (OSError, sqlite3.Error) as exc:
            raise _unavailable(path, exc) from exc
        try:
            at_once = _connect_at_once(path)
        except sqlite3.Error as exc:
            await thread.close()
            raise _unavailable(path, exc) from exc
        return cls(path, thread, at_once)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def write_transactions(self) -> int:
        """How many write transactions this store committed; concurrent writes share one."""
        return self._writes.transactions

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
        return await self._write_statements([(sql, [params])])

    async def _insert_batch(self, table: RecordTable[Any], records: list[Any], conflict_key: str) -> None:
        # INSERT OR IGNORE: a row meeting `conflict_key` (the table's unique key) is skipped.
        await self._write_statements([(table.insert_sql(), [table.to_row(record) for record in records])])

    async def _write_statements(self, statements: Statements) -> int:
        """Commit the statements, each over its rows, all or none (in a transaction shared with
        the writes queued alongside); how many rows they changed."""
        async with self._guard():
            return await self._writes.write(statements)

    async def _fetch_all(self, sql: str, params: Params) -> list[sqlite3.Row]:
        # One call on the connection's thread, so a cancelled reader never leaves a half-read cursor.
        async with self._guard():
            return await self._thread.call(lambda connection: connection.execute(sql, params).fetchall())

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
            await self._writes.drain()  # writes whose callers were cancelled still land
            self._writes.close()
            await self._thread.close()
