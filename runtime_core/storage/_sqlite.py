"""SqliteDurableStore: the embedded default backend, one SQLite file in WAL mode.

Owns the aiosqlite connection, the pragmas that let several processes on one machine share
the file (WAL + busy_timeout), and the queries behind the DurableStore contract. Keeps
aiosqlite's DEBUG records (every statement with its parameters: tenant ids, run ids, payload
bodies) out of the logs, whatever the root level. Must not know about Redis, queues or
executions beyond the rows it is handed.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from runtime_core.errors import ConflictError, StoreUnavailableError
from runtime_core.storage._codec import payload_ref, sortable_timestamp, verified_body
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
from runtime_core.storage._protocol import DEFAULT_LEDGER_LIMIT, DEFAULT_PURGE_BATCH, READINESS_PROBE_ID
from runtime_core.storage._query import SQLITE
from runtime_core.storage._sqlite_schedules import SqliteSchedules
from runtime_core.storage._sqlite_schema import (
    ARCHIVED_STEPS,
    FORENSICS,
    LEDGER,
    RUN_INDEX_HISTORY,
    RUN_RECORDS,
    SCHEMA,
    SNAPSHOTS,
    SUBMITTED_RUNS,
    TRACE_SPANS,
    RecordTable,
)

logging.getLogger("aiosqlite").setLevel(logging.INFO)

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


# Per record kind: the statements a purge runs, each deleting at most `limit` rows.
_PURGE_STATEMENTS: dict[DurableRecordKind, tuple[str, ...]] = {
    DurableRecordKind.LEDGER: (_oldest_rows("ledger", "row_id", "recorded_at"),),
    DurableRecordKind.TRACE: (_oldest_rows("trace_spans", "rowid", "end_ns"),),
    DurableRecordKind.FORENSICS: (_oldest_rows("forensics", "row_id", "recorded_at"),),
    DurableRecordKind.RUN_RECORDS: (
        _oldest_rows("run_records", "shared_run_id", "ended_at"),
        _oldest_rows("run_index_history", "row_id", "recorded_at"),
        _oldest_rows("submitted_runs", "shared_run_id", "submitted_at"),
    ),
}
_EXECUTION_REPLAY_MATERIAL = ("payloads", "archived_steps", "snapshots")


class SqliteDurableStore(SqliteSchedules):
    """DurableStore over one SQLite file; safe to open from several processes at once."""

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

    async def _write(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
        async with self._guard(), self._write_lock:
            cursor = await self._db.execute(sql, params)
            return cursor.rowcount

    async def _write_many(self, sql: str, rows: Sequence[Sequence[Any] | dict[str, Any]]) -> None:
        await self._write_statements([(sql, rows)])

    async def _write_statements(
        self, statements: Sequence[tuple[str, Sequence[Sequence[Any] | dict[str, Any]]]]
    ) -> None:
        # Shielded: a cancelled caller gets its CancelledError at once, but cannot stop the batch
        # between BEGIN and COMMIT, which would leave the shared connection inside a transaction.
        async with self._guard():
            await asyncio.shield(self._transaction(statements))

    async def _transaction(
        self, statements: Sequence[tuple[str, Sequence[Sequence[Any] | dict[str, Any]]]]
    ) -> None:
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

    async def _fetch_all(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        # One call on aiosqlite's thread, so a cancelled reader never leaves a half-read cursor.
        async with self._guard():
            return list(await self._db.execute_fetchall(sql, params))

    async def _fetch_one(self, sql: str, params: Sequence[Any]) -> sqlite3.Row | None:
        rows = await self._fetch_all(sql, params)
        return rows[0] if rows else None

    # Terminal snapshots

    async def put_snapshot(self, snapshot: TerminalSnapshot) -> bool:
        return await self._write(SNAPSHOTS.insert_sql("IGNORE"), SNAPSHOTS.to_row(snapshot)) == 1

    async def get_snapshot(self, execution_id: str, tenant_id: str) -> TerminalSnapshot | None:
        where, params = SQLITE.where(tenant_id, execution_id=execution_id)
        row = await self._fetch_one(SNAPSHOTS.select_sql(where, "execution_id"), params)
        return SNAPSHOTS.from_row(row) if row else None

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
        params = (
            payload_id,
            tenant_id,
            execution_id,
            step_name,
            content_type,
            ref.size,
            ref.sha256,
            body,
            sortable_timestamp(utc_now()),
        )
        if await self._write(_UPSERT_PAYLOAD, params) != 1:
            raise ConflictError(
                f"payload id {payload_id} already belongs to another tenant",
                hint="Generate a fresh payload id.",
            )
        return ref

    async def get_payload(self, payload_id: str, tenant_id: str) -> bytes | None:
        where, params = SQLITE.where(tenant_id, payload_id=payload_id)
        row = await self._fetch_one(f"SELECT body, sha256 FROM payloads WHERE {where}", params)
        if row is None:
            return None
        return verified_body(payload_id, bytes(row["body"]), row["sha256"])

    async def delete_payloads_for_execution(self, execution_id: str, tenant_id: str) -> int:
        where, params = SQLITE.where(tenant_id, execution_id=execution_id)
        return await self._write(f"DELETE FROM payloads WHERE {where}", params)

    # Archived steps

    async def archive_step(self, step: ArchivedStep) -> None:
        await self._write(ARCHIVED_STEPS.insert_sql("REPLACE"), ARCHIVED_STEPS.to_row(step))

    async def get_archived_step(
        self, execution_id: str, step_name: str, tenant_id: str
    ) -> ArchivedStep | None:
        where, params = SQLITE.where(tenant_id, execution_id=execution_id, step_name=step_name)
        row = await self._fetch_one(ARCHIVED_STEPS.select_sql(where, "step_name"), params)
        return ARCHIVED_STEPS.from_row(row) if row else None

    async def list_archived_steps(self, execution_id: str, tenant_id: str) -> list[ArchivedStep]:
        where, params = SQLITE.where(tenant_id, execution_id=execution_id)
        rows = await self._fetch_all(ARCHIVED_STEPS.select_sql(where, "step_name"), params)
        return [ARCHIVED_STEPS.from_row(row) for row in rows]

    # Ledger

    async def append_ledger(self, entries: list[LedgerEntry]) -> None:
        if entries:
            await self._write_many(LEDGER.insert_sql("IGNORE"), [LEDGER.to_row(e) for e in entries])

    async def list_ledger(
        self,
        tenant_id: str,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        limit: int = DEFAULT_LEDGER_LIMIT,
    ) -> list[LedgerEntry]:
        where, params = SQLITE.where(tenant_id, execution_id=execution_id, shared_run_id=shared_run_id)
        sql = LEDGER.select_sql(where, "recorded_at, sequence, row_id") + " LIMIT ?"
        rows = await self._fetch_all(sql, [*params, limit])
        return [LEDGER.from_row(row) for row in rows]

    async def has_ledger_event(self, tenant_id: str, execution_id: str, event: str) -> bool:
        where, params = SQLITE.where(tenant_id, execution_id=execution_id, event=event)
        return await self._fetch_one(f"SELECT 1 FROM ledger WHERE {where} LIMIT 1", params) is not None

    # Trace spans

    async def put_spans(self, spans: list[TraceSpan]) -> None:
        if spans:
            await self._write_many(TRACE_SPANS.insert_sql("IGNORE"), [TRACE_SPANS.to_row(s) for s in spans])

    async def list_spans(self, tenant_id: str, execution_id: str) -> list[TraceSpan]:
        where, params = SQLITE.where(tenant_id, execution_id=execution_id)
        rows = await self._fetch_all(TRACE_SPANS.select_sql(where, "start_ns, span_id"), params)
        return [TRACE_SPANS.from_row(row) for row in rows]

    async def has_span(self, tenant_id: str, trace_id: str, span_id: str) -> bool:
        where, params = SQLITE.where(tenant_id, trace_id=trace_id, span_id=span_id)
        return await self._fetch_one(f"SELECT 1 FROM trace_spans WHERE {where}", params) is not None

    # Recovery forensics

    async def put_forensics(self, record: ForensicsRecord) -> None:
        await self._write(FORENSICS.insert_sql("IGNORE"), FORENSICS.to_row(record))

    async def list_forensics(
        self,
        tenant_id: str,
        runtime_instance_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[ForensicsRecord]:
        where, params = SQLITE.where(
            tenant_id, runtime_instance_id=runtime_instance_id, execution_id=execution_id
        )
        rows = await self._fetch_all(FORENSICS.select_sql(where, "recorded_at, row_id"), params)
        return [FORENSICS.from_row(row) for row in rows]

    # Run-execution index history

    async def append_run_index_event(self, event: RunIndexEvent) -> None:
        await self._write(RUN_INDEX_HISTORY.insert_sql("IGNORE"), RUN_INDEX_HISTORY.to_row(event))

    async def list_run_index_history(
        self,
        tenant_id: str,
        shared_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[RunIndexEvent]:
        where, params = SQLITE.where(tenant_id, shared_run_id=shared_run_id, execution_id=execution_id)
        rows = await self._fetch_all(RUN_INDEX_HISTORY.select_sql(where, "recorded_at, row_id"), params)
        return [RUN_INDEX_HISTORY.from_row(row) for row in rows]

    # Run records

    async def put_run_record(self, record: RunRecord) -> None:
        await self._put_shared_run_row(RUN_RECORDS, record, "run record")

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
        where, params = SQLITE.where(
            tenant_id, shared_run_id=shared_run_id, local_run_id=local_run_id, execution_id=execution_id
        )
        row = await self._fetch_one(RUN_RECORDS.select_sql(where, "created_at DESC") + " LIMIT 1", params)
        return RUN_RECORDS.from_row(row) if row else None

    async def list_run_records(self, tenant_id: str, query: RunRecordQuery) -> list[RunRecord]:
        where, params = SQLITE.run_record_where(tenant_id, query)
        sql = RUN_RECORDS.select_sql(where, SQLITE.run_record_order(query)) + " LIMIT ?"
        rows = await self._fetch_all(sql, [*params, query.limit])
        return [RUN_RECORDS.from_row(row) for row in rows]

    async def count_run_records(self, tenant_id: str, query: RunRecordQuery) -> dict[str, int]:
        sql, params = SQLITE.run_record_count_sql(tenant_id, query)
        return {row["status"]: int(row["records"]) for row in await self._fetch_all(sql, params)}

    # Submitted runs

    async def put_submitted_run(self, record: SubmittedRun) -> None:
        await self._put_shared_run_row(SUBMITTED_RUNS, record, "submitted run")

    async def delete_submitted_run(self, tenant_id: str, shared_run_id: str) -> None:
        await self._write(
            "DELETE FROM submitted_runs WHERE tenant_id = ? AND shared_run_id = ?", (tenant_id, shared_run_id)
        )

    async def list_submitted_runs(self, after: str | None = None, limit: int = 500) -> list[SubmittedRun]:
        sql = SUBMITTED_RUNS.select_sql("shared_run_id > ?", "shared_run_id") + " LIMIT ?"
        rows = await self._fetch_all(sql, [after or "", limit])
        return [SUBMITTED_RUNS.from_row(row) for row in rows]

    # Retention

    async def purge(
        self, kind: DurableRecordKind, older_than: datetime, limit: int = DEFAULT_PURGE_BATCH
    ) -> int:
        if kind is DurableRecordKind.SNAPSHOTS:
            return await self._purge_snapshots(sortable_timestamp(older_than), limit)
        cutoff: str | int = (
            int(older_than.timestamp() * 1e9)
            if kind is DurableRecordKind.TRACE
            else sortable_timestamp(older_than)
        )
        deleted = 0
        for sql in _PURGE_STATEMENTS[kind]:
            deleted += await self._write(sql, (cutoff, limit))
        return deleted

    async def _purge_snapshots(self, cutoff: str, limit: int) -> int:
        """The oldest terminal snapshots with their executions' payloads and archived steps."""
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

    async def health(self) -> None:
        await self._fetch_all("SELECT 1", ())

    async def probe_write(self) -> None:
        await self._write(_UPSERT_PROBE, (READINESS_PROBE_ID, sortable_timestamp(utc_now())))

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            async with self._write_lock:  # a shielded batch may outlive its cancelled caller
                await self._db.close()
