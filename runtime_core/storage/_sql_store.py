"""SqlDurableStore: the DurableStore contract as SQL, shared by the SQLite and PostgreSQL backends.

Owns every statement the two backends make alike (tenant-scoped reads, inserts that leave a
stored key alone, same-tenant upserts, purges by age), written once with `?` parameters and
spelled in the backend's style by its SqlDialect. A backend supplies how statements run
(`_write`, `_fetch_all`, `_insert_batch`), its purge statements and the purge of terminal
snapshots with their replay material. Must not open connections.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from runtime_core.storage._codec import payload_ref, verified_body
from runtime_core.storage._errors import payload_of_another_tenant, shared_run_of_another_tenant
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
from runtime_core.storage._protocol import DEFAULT_LEDGER_LIMIT, DEFAULT_PURGE_BATCH, READINESS_PROBE_ID
from runtime_core.storage._query import SqlDialect
from runtime_core.storage._sql_schedules import SqlSchedules
from runtime_core.storage._sql_tables import RecordTable, RecordTables

Params = Sequence[Any] | dict[str, Any]

_UPSERT_PAYLOAD = """
INSERT INTO payloads (payload_id, tenant_id, execution_id, step_name, content_type, size, sha256, body,
                      created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (payload_id) DO UPDATE SET
    execution_id = excluded.execution_id, step_name = excluded.step_name,
    content_type = excluded.content_type, size = excluded.size, sha256 = excluded.sha256,
    body = excluded.body, created_at = excluded.created_at
WHERE payloads.tenant_id = excluded.tenant_id
"""
_UPSERT_PROBE = """
INSERT INTO health_probes (probe_id, written_at) VALUES (?, ?)
ON CONFLICT (probe_id) DO UPDATE SET written_at = excluded.written_at
"""


def purge_statements(
    oldest_rows: Callable[[str, str, str], str], trace_row_key: str
) -> dict[DurableRecordKind, tuple[str, ...]]:
    """The statements of a purge per record kind but snapshots, in a backend's spelling:
    `oldest_rows(table, row key, age column)` deletes a batch of a table's oldest rows (params:
    cutoff, limit); `trace_row_key` names a trace span's row in that backend."""
    return {
        DurableRecordKind.LEDGER: (oldest_rows("ledger", "row_id", "recorded_at"),),
        DurableRecordKind.TRACE: (oldest_rows("trace_spans", trace_row_key, "end_ns"),),
        DurableRecordKind.FORENSICS: (oldest_rows("forensics", "row_id", "recorded_at"),),
        DurableRecordKind.RUN_RECORDS: (
            oldest_rows("run_records", "shared_run_id", "ended_at"),
            oldest_rows("run_index_history", "row_id", "recorded_at"),
            oldest_rows("submitted_runs", "shared_run_id", "submitted_at"),
        ),
    }


class SqlDurableStore(SqlSchedules):
    """The contract's queries over a backend's plumbing (the methods below that raise)."""

    _dialect: ClassVar[SqlDialect]
    _tables: ClassVar[RecordTables]
    _purge_statements: ClassVar[dict[DurableRecordKind, tuple[str, ...]]]
    """Per record kind but snapshots: the statements a purge runs (params: cutoff, limit)."""

    # Plumbing

    async def _write(self, sql: str, params: Params) -> int:
        """Run one statement; how many rows it changed."""
        raise NotImplementedError

    async def _fetch_all(self, sql: str, params: Params) -> list[Any]:
        """The rows of one query, each readable by column name."""
        raise NotImplementedError

    async def _insert_batch(self, table: RecordTable[Any], records: list[Any], conflict_key: str) -> None:
        """Insert every record; one whose `conflict_key` is stored (or repeated) is skipped."""
        raise NotImplementedError

    async def _purge_snapshots(self, cutoff: Any, limit: int) -> int:
        """Delete the oldest terminal snapshots older than `cutoff` with their executions' payloads
        and archived steps; how many snapshots went."""
        raise NotImplementedError

    async def _fetch_one(self, sql: str, params: Params) -> Any | None:
        rows = await self._fetch_all(sql, params)
        return rows[0] if rows else None

    async def _select(
        self, table: RecordTable[Any], where: str, params: list[Any], order_by: str, limit: int | None = None
    ) -> list[Any]:
        return [table.from_row(row) for row in await self._select_rows(table, where, params, order_by, limit)]

    async def _select_rows(
        self, table: RecordTable[Any], where: str, params: list[Any], order_by: str, limit: int | None = None
    ) -> list[Any]:
        """The rows of `table` as stored (each readable by column name), not yet records."""
        sql = table.select_sql(where, order_by)
        if limit is not None:
            sql, params = f"{sql} LIMIT {self._dialect.placeholder}", [*params, limit]
        return await self._fetch_all(sql, params)

    # Terminal snapshots

    async def put_snapshot(self, snapshot: TerminalSnapshot) -> bool:
        snapshots = self._tables.snapshots
        return await self._write(snapshots.insert_sql(), snapshots.to_row(snapshot)) == 1

    async def get_snapshot(self, execution_id: str, tenant_id: str) -> TerminalSnapshot | None:
        filters = self._dialect.where(tenant_id, execution_id=execution_id)
        found = await self._select(self._tables.snapshots, *filters, "execution_id")
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
        created_at = self._dialect.timestamp(utc_now())
        params = (payload_id, tenant_id, execution_id, step_name, content_type, ref.size, ref.sha256, body)
        if await self._write(self._dialect.spell(_UPSERT_PAYLOAD), (*params, created_at)) != 1:
            raise payload_of_another_tenant(payload_id)
        return ref

    async def get_payload(self, payload_id: str, tenant_id: str) -> bytes | None:
        where, params = self._dialect.where(tenant_id, payload_id=payload_id)
        row = await self._fetch_one(f"SELECT body, sha256 FROM payloads WHERE {where}", params)
        if row is None:
            return None
        return verified_body(payload_id, bytes(row["body"]), row["sha256"])

    async def delete_payloads_for_execution(self, execution_id: str, tenant_id: str) -> int:
        where, params = self._dialect.where(tenant_id, execution_id=execution_id)
        return await self._write(f"DELETE FROM payloads WHERE {where}", params)

    # Archived steps

    async def archive_step(self, step: ArchivedStep) -> None:
        steps = self._tables.archived_steps
        await self._write(steps.replace_sql("tenant_id, execution_id, step_name"), steps.to_row(step))

    async def get_archived_step(
        self, execution_id: str, step_name: str, tenant_id: str
    ) -> ArchivedStep | None:
        filters = self._dialect.where(tenant_id, execution_id=execution_id, step_name=step_name)
        found = await self._select(self._tables.archived_steps, *filters, "step_name")
        return found[0] if found else None

    async def list_archived_steps(self, execution_id: str, tenant_id: str) -> list[ArchivedStep]:
        filters = self._dialect.where(tenant_id, execution_id=execution_id)
        return await self._select(self._tables.archived_steps, *filters, "step_name")

    # Ledger

    async def append_ledger(self, entries: list[LedgerEntry]) -> None:
        if entries:
            await self._insert_batch(self._tables.ledger, entries, "entry_id")

    async def list_ledger(
        self,
        tenant_id: str,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        limit: int = DEFAULT_LEDGER_LIMIT,
    ) -> list[LedgerEntry]:
        filters = self._dialect.where(tenant_id, execution_id=execution_id, shared_run_id=shared_run_id)
        return await self._select(self._tables.ledger, *filters, "recorded_at, sequence, row_id", limit)

    async def has_ledger_event(self, tenant_id: str, execution_id: str, event: str) -> bool:
        where, params = self._dialect.where(tenant_id, execution_id=execution_id, event=event)
        return await self._fetch_one(f"SELECT 1 FROM ledger WHERE {where} LIMIT 1", params) is not None

    # Trace spans

    async def put_spans(self, spans: list[TraceSpan]) -> None:
        if spans:
            await self._insert_batch(self._tables.trace_spans, spans, "trace_id, span_id")

    async def list_spans(self, tenant_id: str, execution_id: str) -> list[TraceSpan]:
        filters = self._dialect.where(tenant_id, execution_id=execution_id)
        return await self._select(self._tables.trace_spans, *filters, "start_ns, span_id")

    async def has_span(self, tenant_id: str, trace_id: str, span_id: str) -> bool:
        where, params = self._dialect.where(tenant_id, trace_id=trace_id, span_id=span_id)
        return await self._fetch_one(f"SELECT 1 FROM trace_spans WHERE {where}", params) is not None

    # Recovery forensics

    async def put_forensics(self, record: ForensicsRecord) -> None:
        forensics = self._tables.forensics
        await self._write(forensics.insert_sql(), forensics.to_row(record))

    async def list_forensics(
        self,
        tenant_id: str,
        runtime_instance_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[ForensicsRecord]:
        filters = self._dialect.where(
            tenant_id, runtime_instance_id=runtime_instance_id, execution_id=execution_id
        )
        return await self._select(self._tables.forensics, *filters, "recorded_at, row_id")

    # Run-execution index history

    async def append_run_index_event(self, event: RunIndexEvent) -> None:
        history = self._tables.run_index_history
        await self._write(history.insert_sql(), history.to_row(event))

    async def list_run_index_history(
        self,
        tenant_id: str,
        shared_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[RunIndexEvent]:
        filters = self._dialect.where(tenant_id, shared_run_id=shared_run_id, execution_id=execution_id)
        return await self._select(self._tables.run_index_history, *filters, "recorded_at, row_id")

    # Run records

    async def put_run_record(self, record: RunRecord) -> None:
        await self._put_shared_run_row(self._tables.run_records, record, "run record")

    async def _put_shared_run_row(self, table: RecordTable[Any], record: Any, noun: str) -> None:
        """Upsert a row keyed by SharedRunId; a row of another tenant under that id is a conflict."""
        if await self._write(table.upsert_sql("shared_run_id"), table.to_row(record)) != 1:
            raise shared_run_of_another_tenant(noun, record.shared_run_id)

    async def find_run_record(
        self,
        tenant_id: str,
        *,
        shared_run_id: str | None = None,
        local_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> RunRecord | None:
        filters = self._dialect.where(
            tenant_id, shared_run_id=shared_run_id, local_run_id=local_run_id, execution_id=execution_id
        )
        found = await self._select(self._tables.run_records, *filters, "created_at DESC", 1)
        return found[0] if found else None

    async def list_run_records(self, tenant_id: str, query: RunRecordQuery) -> list[RunRecord]:
        filters = self._dialect.run_record_where(tenant_id, query)
        order = self._dialect.run_record_order(query)
        return await self._select(self._tables.run_records, *filters, order, query.limit)

    async def count_run_records(self, tenant_id: str, query: RunRecordQuery) -> dict[str, int]:
        sql, params = self._dialect.run_record_count_sql(tenant_id, query)
        return {row["status"]: int(row["records"]) for row in await self._fetch_all(sql, params)}

    # Submitted runs

    async def put_submitted_run(self, record: SubmittedRun) -> None:
        await self._put_shared_run_row(self._tables.submitted_runs, record, "submitted run")

    async def delete_submitted_run(self, tenant_id: str, shared_run_id: str) -> None:
        where, params = self._dialect.where(tenant_id, shared_run_id=shared_run_id)
        await self._write(f"DELETE FROM submitted_runs WHERE {where}", params)

    async def list_submitted_runs(self, after: str | None = None, limit: int = 500) -> list[SubmittedRun]:
        where = self._dialect.spell("shared_run_id > ?")
        return await self._select(self._tables.submitted_runs, where, [after or ""], "shared_run_id", limit)

    # Retention

    async def purge(
        self, kind: DurableRecordKind, older_than: datetime, limit: int = DEFAULT_PURGE_BATCH
    ) -> int:
        if kind is DurableRecordKind.SNAPSHOTS:
            return await self._purge_snapshots(self._dialect.timestamp(older_than), limit)
        cutoff = (
            int(older_than.timestamp() * 1e9)
            if kind is DurableRecordKind.TRACE
            else self._dialect.timestamp(older_than)
        )
        deleted = 0
        for sql in self._purge_statements[kind]:
            deleted += await self._write(sql, (cutoff, limit))
        return deleted

    # Lifecycle

    async def health(self) -> None:
        await self._fetch_all("SELECT 1", ())

    async def probe_write(self) -> None:
        """Upsert the one readiness probe record."""
        probe = (READINESS_PROBE_ID, self._dialect.timestamp(utc_now()))
        await self._write(self._dialect.spell(_UPSERT_PROBE), probe)
