"""PostgresDurableStore: the multi-host backend, psycopg 3 async over a connection pool.

Owns the queries behind the DurableStore contract (JSONB documents, one INSERT per ledger or
span batch, purges that skip rows a concurrent purger holds), migrating the schema when it
opens (_postgres_migrate) and the bounded readiness probe. The pool, its retries and error
rules are _postgres_pool's. Must not know about Redis, queues or executions beyond the rows it
is handed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg.rows import DictRow

from runtime_core.errors import ConflictError
from runtime_core.storage._codec import payload_ref, verified_body
from runtime_core.storage._errors import shared_run_of_another_tenant
from runtime_core.storage._models import (
    ArchivedStep,
    DurableRecordKind,
    ForensicsRecord,
    LedgerEntry,
    PayloadRef,
    RunIndexEvent,
    RunRecord,
    RunRecordQuery,
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
    utc_now,
)
from runtime_core.storage._postgres_migrate import migrate
from runtime_core.storage._postgres_pool import Params, PostgresPool
from runtime_core.storage._postgres_schedules import PostgresSchedules
from runtime_core.storage._postgres_schema import (
    ARCHIVED_STEPS,
    FORENSICS,
    LEDGER,
    LEDGER_COLUMN_TYPES,
    MIGRATIONS,
    RUN_INDEX_HISTORY,
    RUN_RECORDS,
    SNAPSHOTS,
    SPAN_COLUMN_TYPES,
    SUBMITTED_RUNS,
    TRACE_SPANS,
    Migration,
    RecordTable,
)
from runtime_core.storage._protocol import DEFAULT_LEDGER_LIMIT, DEFAULT_PURGE_BATCH, READINESS_PROBE_ID
from runtime_core.storage._query import POSTGRES

where = POSTGRES.where

_UPSERT_PAYLOAD = """
INSERT INTO payloads (payload_id, tenant_id, execution_id, step_name, content_type, size, sha256, body,
                      created_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (payload_id) DO UPDATE SET
    execution_id = excluded.execution_id, step_name = excluded.step_name,
    content_type = excluded.content_type, size = excluded.size, sha256 = excluded.sha256,
    body = excluded.body, created_at = excluded.created_at
WHERE payloads.tenant_id = excluded.tenant_id
"""
_UPSERT_PROBE = """
INSERT INTO health_probes (probe_id, written_at) VALUES (%s, %s)
ON CONFLICT (probe_id) DO UPDATE SET written_at = excluded.written_at
"""
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


_PURGE_STATEMENTS: dict[DurableRecordKind, tuple[str, ...]] = {
    DurableRecordKind.LEDGER: (_oldest_rows("ledger", "row_id", "recorded_at"),),
    DurableRecordKind.TRACE: (_oldest_rows("trace_spans", "trace_id, span_id", "end_ns"),),
    DurableRecordKind.FORENSICS: (_oldest_rows("forensics", "row_id", "recorded_at"),),
    DurableRecordKind.RUN_RECORDS: (
        _oldest_rows("run_records", "shared_run_id", "ended_at"),
        _oldest_rows("run_index_history", "row_id", "recorded_at"),
        _oldest_rows("submitted_runs", "shared_run_id", "submitted_at"),
    ),
}


class PostgresDurableStore(PostgresSchedules):
    """DurableStore over one PostgreSQL database, shared by every host."""

    def __init__(self, pool: PostgresPool) -> None:
        self._db = pool
        self._probe: asyncio.Task[int] | None = None
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

    async def _execute(self, sql: str, params: Params) -> int:
        return await self._db.execute(sql, params)

    async def _fetch_all(self, sql: str, params: Params) -> list[DictRow]:
        return await self._db.fetch_all(sql, params)

    async def _fetch_one(self, sql: str, params: Sequence[Any]) -> DictRow | None:
        rows = await self._fetch_all(sql, params)
        return rows[0] if rows else None

    async def _select(
        self,
        table: RecordTable[Any],
        where_sql: str,
        params: list[Any],
        order_by: str,
        limit: int | None = None,
    ) -> list[Any]:
        sql = table.select_sql(where_sql, order_by)
        if limit is not None:
            sql, params = f"{sql} LIMIT %s", [*params, limit]
        return [table.from_row(row) for row in await self._fetch_all(sql, params)]

    # Terminal snapshots

    async def put_snapshot(self, snapshot: TerminalSnapshot) -> bool:
        return await self._execute(SNAPSHOTS.insert_sql(), SNAPSHOTS.to_row(snapshot)) == 1

    async def get_snapshot(self, execution_id: str, tenant_id: str) -> TerminalSnapshot | None:
        found = await self._select(SNAPSHOTS, *where(tenant_id, execution_id=execution_id), "execution_id")
        return found[0] if found else None

    # Payloads

    async def put_payload(
        self,
        payload_id: str,
        tenant_id: str,
        execution_id: str,
        step_name: str,
        body: bytes,
        content_type: str,
    ) -> PayloadRef:
        ref = payload_ref(payload_id, body)
        params = (payload_id, tenant_id, execution_id, step_name, content_type, ref.size, ref.sha256, body)
        if await self._execute(_UPSERT_PAYLOAD, (*params, utc_now())) != 1:
            raise ConflictError(
                f"payload id {payload_id} already belongs to another tenant",
                hint="Generate a fresh payload id.",
            )
        return ref

    async def get_payload(self, payload_id: str, tenant_id: str) -> bytes | None:
        where_sql, params = where(tenant_id, payload_id=payload_id)
        row = await self._fetch_one(f"SELECT body, sha256 FROM payloads WHERE {where_sql}", params)
        if row is None:
            return None
        return verified_body(payload_id, bytes(row["body"]), row["sha256"])

    async def delete_payloads_for_execution(self, execution_id: str, tenant_id: str) -> int:
        where_sql, params = where(tenant_id, execution_id=execution_id)
        return await self._execute(f"DELETE FROM payloads WHERE {where_sql}", params)

    # Archived steps

    async def archive_step(self, step: ArchivedStep) -> None:
        key = "tenant_id, execution_id, step_name"
        await self._execute(
            ARCHIVED_STEPS.upsert_sql(key, same_tenant_only=False), ARCHIVED_STEPS.to_row(step)
        )

    async def get_archived_step(
        self, execution_id: str, step_name: str, tenant_id: str
    ) -> ArchivedStep | None:
        filters = where(tenant_id, execution_id=execution_id, step_name=step_name)
        found = await self._select(ARCHIVED_STEPS, *filters, "step_name")
        return found[0] if found else None

    async def list_archived_steps(self, execution_id: str, tenant_id: str) -> list[ArchivedStep]:
        return await self._select(ARCHIVED_STEPS, *where(tenant_id, execution_id=execution_id), "step_name")

    # Ledger

    async def append_ledger(self, entries: list[LedgerEntry]) -> None:
        if entries:
            sql = LEDGER.bulk_insert_sql(LEDGER_COLUMN_TYPES, "entry_id")
            await self._execute(sql, LEDGER.to_columns(entries))

    async def list_ledger(
        self,
        tenant_id: str,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        limit: int = DEFAULT_LEDGER_LIMIT,
    ) -> list[LedgerEntry]:
        filters = where(tenant_id, execution_id=execution_id, shared_run_id=shared_run_id)
        return await self._select(LEDGER, *filters, "recorded_at, sequence, row_id", limit)

    async def has_ledger_event(self, tenant_id: str, execution_id: str, event: str) -> bool:
        where_sql, params = where(tenant_id, execution_id=execution_id, event=event)
        return await self._fetch_one(f"SELECT 1 FROM ledger WHERE {where_sql} LIMIT 1", params) is not None

    # Trace spans

    async def put_spans(self, spans: list[TraceSpan]) -> None:
        if spans:
            sql = TRACE_SPANS.bulk_insert_sql(SPAN_COLUMN_TYPES, "trace_id, span_id")
            await self._execute(sql, TRACE_SPANS.to_columns(spans))

    async def list_spans(self, tenant_id: str, execution_id: str) -> list[TraceSpan]:
        return await self._select(
            TRACE_SPANS, *where(tenant_id, execution_id=execution_id), "start_ns, span_id"
        )

    async def has_span(self, tenant_id: str, trace_id: str, span_id: str) -> bool:
        where_sql, params = where(tenant_id, trace_id=trace_id, span_id=span_id)
        return await self._fetch_one(f"SELECT 1 FROM trace_spans WHERE {where_sql}", params) is not None

    # Recovery forensics

    async def put_forensics(self, record: ForensicsRecord) -> None:
        await self._execute(FORENSICS.insert_sql(), FORENSICS.to_row(record))

    async def list_forensics(
        self,
        tenant_id: str,
        runtime_instance_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[ForensicsRecord]:
        filters = where(tenant_id, runtime_instance_id=runtime_instance_id, execution_id=execution_id)
        return await self._select(FORENSICS, *filters, "recorded_at, row_id")

    # Run-execution index history

    async def append_run_index_event(self, event: RunIndexEvent) -> None:
        await self._execute(RUN_INDEX_HISTORY.insert_sql(), RUN_INDEX_HISTORY.to_row(event))

    async def list_run_index_history(
        self,
        tenant_id: str,
        shared_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[RunIndexEvent]:
        filters = where(tenant_id, shared_run_id=shared_run_id, execution_id=execution_id)
        return await self._select(RUN_INDEX_HISTORY, *filters, "recorded_at, row_id")

    # Run records

    async def put_run_record(self, record: RunRecord) -> None:
        await self._put_shared_run_row(RUN_RECORDS, record, "run record")

    async def _put_shared_run_row(self, table: RecordTable[Any], record: Any, noun: str) -> None:
        """Upsert a row keyed by SharedRunId; a row of another tenant under that id is a conflict."""
        if await self._execute(table.upsert_sql("shared_run_id"), table.to_row(record)) != 1:
            raise shared_run_of_another_tenant(noun, record.shared_run_id)

    async def find_run_record(
        self,
        tenant_id: str,
        *,
        shared_run_id: str | None = None,
        local_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> RunRecord | None:
        filters = where(
            tenant_id, shared_run_id=shared_run_id, local_run_id=local_run_id, execution_id=execution_id
        )
        found = await self._select(RUN_RECORDS, *filters, "created_at DESC", 1)
        return found[0] if found else None

    async def list_run_records(self, tenant_id: str, query: RunRecordQuery) -> list[RunRecord]:
        filters = POSTGRES.run_record_where(tenant_id, query)
        return await self._select(RUN_RECORDS, *filters, POSTGRES.run_record_order(query), query.limit)

    async def count_run_records(self, tenant_id: str, query: RunRecordQuery) -> dict[str, int]:
        sql, params = POSTGRES.run_record_count_sql(tenant_id, query)
        return {row["status"]: int(row["records"]) for row in await self._fetch_all(sql, params)}

    # Submitted runs

    async def put_submitted_run(self, record: SubmittedRun) -> None:
        await self._put_shared_run_row(SUBMITTED_RUNS, record, "submitted run")

    async def delete_submitted_run(self, tenant_id: str, shared_run_id: str) -> None:
        where_sql, params = where(tenant_id, shared_run_id=shared_run_id)
        await self._execute(f"DELETE FROM submitted_runs WHERE {where_sql}", params)

    async def list_submitted_runs(self, after: str | None = None, limit: int = 500) -> list[SubmittedRun]:
        return await self._select(SUBMITTED_RUNS, "shared_run_id > %s", [after or ""], "shared_run_id", limit)

    # Retention

    async def purge(
        self, kind: DurableRecordKind, older_than: datetime, limit: int = DEFAULT_PURGE_BATCH
    ) -> int:
        if kind is DurableRecordKind.SNAPSHOTS:
            row = await self._fetch_one(_PURGE_SNAPSHOTS, (older_than, limit))
            return int(row["purged"]) if row else 0
        cutoff = int(older_than.timestamp() * 1e9) if kind is DurableRecordKind.TRACE else older_than
        deleted = 0
        for sql in _PURGE_STATEMENTS[kind]:
            deleted += await self._execute(sql, (cutoff, limit))
        return deleted

    # Lifecycle

    async def health(self) -> None:
        await self._fetch_all("SELECT 1", ())

    async def probe_write(self) -> None:
        """Upsert the probe record within the store's timeout. One probe at a time: a probe that
        outlives its caller's deadline (a partitioned server) is joined, never stacked."""
        if self._db.closed:
            raise self._db.unavailable(RuntimeError("the store was closed"))
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(self._execute(_UPSERT_PROBE, (READINESS_PROBE_ID, utc_now())))
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
