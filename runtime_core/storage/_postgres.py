"""PostgresDurableStore: the multi-host backend, psycopg 3 async over a connection pool.

Owns how statements run on the pool (one INSERT per ledger or span batch), its purges (that
skip rows a concurrent purger holds), migrating the schema when it opens (_postgres_migrate)
and the bounded readiness probe; the queries are SqlDurableStore's. The pool, its retries and
error rules are _postgres_pool's. Must not know about Redis, queues or executions beyond the
rows it is handed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg.rows import DictRow

from runtime_core.storage._postgres_migrate import migrate
from runtime_core.storage._postgres_pool import PostgresPool
from runtime_core.storage._postgres_schema import (
    BULK_COLUMN_TYPES,
    MIGRATIONS,
    TABLES,
    Migration,
    PostgresTable,
)
from runtime_core.storage._query import POSTGRES
from runtime_core.storage._sql_store import Params, SqlDurableStore, purge_statements
from runtime_core.storage._sql_tables import RecordTable

_PURGE_SNAPSHOTS = """
WITH purged AS (
    DELETE FROM snapshots WHERE execution_id IN (
        SELECT execution_id FROM snapshots WHERE created_at < %s ORDER BY created_at LIMIT %s
        FOR UPDATE SKIP LOCKED)
    RETURNING tenant_id, execution_id
), payloads_gone AS (
    DELETE FROM payloads USING purged
    WHERE payloads.tenant_id = purged.tenant_id AND payloads.execution_id = purged.execution_id
), steps_gone AS (
    DELETE FROM archived_steps USING purged
    WHERE archived_steps.tenant_id = purged.tenant_id AND archived_steps.execution_id = purged.execution_id
)
SELECT count(*) AS purged FROM purged
"""


def _oldest_rows(table: str, row_key: str, age_column: str) -> str:
    """Delete the `limit` oldest rows older than a cutoff (params: cutoff, limit), skipping rows a
    concurrent purge already holds."""
    return (
        f"DELETE FROM {table} WHERE ({row_key}) IN (SELECT {row_key} FROM {table} WHERE {age_column} < %s "
        f"ORDER BY {age_column} LIMIT %s FOR UPDATE SKIP LOCKED)"
    )


class PostgresDurableStore(SqlDurableStore):
    """DurableStore over one PostgreSQL database, shared by every host."""

    _dialect = POSTGRES
    _tables = TABLES
    _purge_statements = purge_statements(_oldest_rows, "trace_id, span_id")

    def __init__(self, pool: PostgresPool) -> None:
        self._db = pool
        self._probe: asyncio.Task[None] | None = None
        self.applied_migrations: list[int] = []

    @classmethod
    async def open(
        cls,
        conninfo: str,
        password: str | None = None,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout_ms: int = 5000,
        migrations: Sequence[Migration] = MIGRATIONS,
    ) -> PostgresDurableStore:
        """Open the pool and bring the schema up to date; StoreUnavailableError when unreachable,
        SchemaVersionError when the database is newer than this code."""
        pool = await PostgresPool.open(
            conninfo, password, min_size=min_size, max_size=max_size, timeout_ms=timeout_ms
        )
        store = cls(pool)
        try:
            store.applied_migrations = await pool.run(lambda c: migrate(c, migrations), retry=False)
        except BaseException:
            await pool.close()
            raise
        return store

    # Plumbing

    async def _write(self, sql: str, params: Params) -> int:
        return await self._db.execute(sql, params)

    async def _fetch_all(self, sql: str, params: Params) -> list[DictRow]:
        return await self._db.fetch_all(sql, params)

    async def _insert_batch(self, table: RecordTable[Any], records: list[Any], conflict_key: str) -> None:
        assert isinstance(table, PostgresTable)
        sql = table.bulk_insert_sql(BULK_COLUMN_TYPES[table.name], conflict_key)
        await self._write(sql, table.to_columns(records))

    async def _purge_snapshots(self, cutoff: datetime, limit: int) -> int:
        row = await self._fetch_one(_PURGE_SNAPSHOTS, (cutoff, limit))
        return int(row["purged"]) if row else 0

    # Lifecycle

    async def probe_write(self) -> None:
        """Upsert the probe record within the store's timeout. One probe at a time: a probe that
        outlives its caller's deadline (a partitioned server) is joined, never stacked."""
        if self._db.closed:
            raise self._db.unavailable(RuntimeError("the store was closed"))
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(super().probe_write())
            self._probe.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            await asyncio.wait_for(asyncio.shield(self._probe), self._db.timeout_s)
        except TimeoutError:
            late = TimeoutError(f"no write acknowledged within {self._db.timeout_s:g} s")
            raise self._db.unavailable(late) from None

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(BaseException):
                await self._probe
        await self._db.close()
