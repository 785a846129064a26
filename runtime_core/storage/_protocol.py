"""The DurableStore contract every backend implements (SQLite, PostgreSQL, MongoDB).

Owns the method signatures and their documented semantics. Every read takes the caller's
`tenant_id` and never returns another tenant's rows. Must not contain any backend logic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from runtime_core.storage._models import (
    ArchivedStep,
    DurableRecordKind,
    ForensicsRecord,
    LedgerEntry,
    PayloadRef,
    RunIndexEvent,
    RunRecord,
    RunRecordQuery,
    ScheduleFire,
    SchedulePage,
    ScheduleRecord,
    ScheduleScan,
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
    UnreadableSchedule,
)

DEFAULT_LEDGER_LIMIT = 1000
DEFAULT_PURGE_BATCH = 1000
DEFAULT_SCHEDULE_PAGE = 500
READINESS_PROBE_ID = "readiness"  # the one record `probe_write` upserts


class DurableStore(Protocol):
    """Durable, tenant-scoped storage for everything that outlives Redis hot state."""

    # Terminal snapshots
    async def put_snapshot(self, snapshot: TerminalSnapshot) -> bool:
        """Write once per execution_id: True if written, False if one already existed."""
        ...

    async def get_snapshot(self, execution_id: str, tenant_id: str) -> TerminalSnapshot | None: ...

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
        """Store or replace (same tenant only) a payload; ConflictError if another tenant owns the id."""
        ...

    async def get_payload(self, payload_id: str, tenant_id: str) -> bytes | None:
        """The stored bytes, None when absent or foreign; PayloadCorruptedError on sha256 mismatch."""
        ...

    async def delete_payloads_for_execution(self, execution_id: str, tenant_id: str) -> int:
        """Delete the tenant's payloads of one execution; returns how many were deleted."""
        ...

    # Archived steps
    async def archive_step(self, step: ArchivedStep) -> None:
        """Insert or replace the archived copy of (execution_id, step_name) for the step's tenant."""
        ...

    async def get_archived_step(
        self, execution_id: str, step_name: str, tenant_id: str
    ) -> ArchivedStep | None: ...

    async def list_archived_steps(self, execution_id: str, tenant_id: str) -> list[ArchivedStep]:
        """Ordered by step_name."""
        ...

    # Ledger
    async def append_ledger(self, entries: list[LedgerEntry]) -> None:
        """Append a batch; an entry_id already stored is ignored (safe to retry)."""
        ...

    async def list_ledger(
        self,
        tenant_id: str,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        limit: int = DEFAULT_LEDGER_LIMIT,
    ) -> list[LedgerEntry]:
        """Ordered by recorded_at, then sequence, then insertion."""
        ...

    async def has_ledger_event(self, tenant_id: str, execution_id: str, event: str) -> bool:
        """Whether the tenant's ledger holds at least one `event` entry of the execution."""
        ...

    # Trace spans
    async def put_spans(self, spans: list[TraceSpan]) -> None:
        """Store a batch; a (trace_id, span_id) already stored is ignored."""
        ...

    async def list_spans(self, tenant_id: str, execution_id: str) -> list[TraceSpan]:
        """Ordered by start_ns, then span_id."""
        ...

    async def has_span(self, tenant_id: str, trace_id: str, span_id: str) -> bool:
        """Whether the tenant's span (trace_id, span_id) is stored."""
        ...

    # Recovery forensics
    async def put_forensics(self, record: ForensicsRecord) -> None:
        """Append one record; a record_id already stored is ignored."""
        ...

    async def list_forensics(
        self,
        tenant_id: str,
        runtime_instance_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[ForensicsRecord]:
        """Ordered by recorded_at, then insertion."""
        ...

    # Run-execution index history
    async def append_run_index_event(self, event: RunIndexEvent) -> None:
        """Append one event; an event_id already stored is ignored."""
        ...

    async def list_run_index_history(
        self,
        tenant_id: str,
        shared_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[RunIndexEvent]:
        """Ordered by recorded_at, then insertion."""
        ...

    # Run records
    async def put_run_record(self, record: RunRecord) -> None:
        """Insert or replace the record of `record.shared_run_id` (same tenant only)."""
        ...

    async def find_run_record(
        self,
        tenant_id: str,
        *,
        shared_run_id: str | None = None,
        local_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> RunRecord | None:
        """The tenant's record matching every given id; None when absent or foreign."""
        ...

    async def list_run_records(self, tenant_id: str, query: RunRecordQuery) -> list[RunRecord]:
        """Newest first: created_at descending, then shared_run_id descending; at most `query.limit`.

        `query.before` keeps only records strictly older than that cursor, `query.after` only
        strictly newer ones; `query.oldest_first` reverses the order (a page towards newer runs).
        """
        ...

    async def count_run_records(self, tenant_id: str, query: RunRecordQuery) -> dict[str, int]:
        """The tenant's records per status matching the query's filters (status, cursors and
        limit ignored)."""
        ...

    # Submitted runs (the requests of runs not yet archived)
    async def put_submitted_run(self, record: SubmittedRun) -> None:
        """Store (or replace) the request of one shared run."""
        ...

    async def delete_submitted_run(self, tenant_id: str, shared_run_id: str) -> None:
        """Forget a run's request (it was archived); an unknown id is not an error."""
        ...

    async def list_submitted_runs(self, after: str | None = None, limit: int = 500) -> list[SubmittedRun]:
        """Every tenant's, by shared_run_id ascending, strictly after `after`; at most `limit`.

        For the control plane only (requeueing runs whose hot state Redis lost), never a caller.
        """
        ...

    # Schedules
    async def insert_schedule(self, record: ScheduleRecord) -> bool:
        """Store a new schedule; False (nothing written) when its id, or its name within the
        tenant, is already taken."""
        ...

    async def get_schedule(
        self, tenant_id: str, schedule_id: str
    ) -> ScheduleRecord | UnreadableSchedule | None:
        """The tenant's schedule; None when absent or foreign; an UnreadableSchedule (never an
        error: a damaged row must stay deletable) when its row does not read as a ScheduleRecord."""
        ...

    async def list_schedules(
        self, tenant_id: str, *, after_name: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> SchedulePage:
        """The tenant's schedules by name ascending, strictly after `after_name`; at most `limit`
        rows. A row that does not read as a ScheduleRecord is reported in `unreadable` (never
        raised: one corrupt row must not hide the others); page on with `last_name` until it is
        None (a page with fewer than `limit` rows)."""
        ...

    async def list_active_schedules(
        self, after: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> ScheduleScan:
        """Every tenant's active schedules by schedule_id ascending, strictly after `after`; at
        most `limit` rows. A row that does not read as a ScheduleRecord is reported in
        `unreadable` (never raised: one corrupt row must not hide the others); page on with
        `last_id` until it is None (a page with fewer than `limit` rows).

        For the control plane's scheduler only, never a caller.
        """
        ...

    async def set_schedule_status(
        self, tenant_id: str, schedule_id: str, status: str, changed_at: datetime
    ) -> ScheduleRecord | UnreadableSchedule | None:
        """Set the status (and `status_changed_at`) when it differs; the record as it is now
        (as `get_schedule` reads it), None when absent or foreign."""
        ...

    async def record_schedule_fire(self, tenant_id: str, schedule_id: str, fire: ScheduleFire) -> bool:
        """Record a handled tick: a tick newer than `last_tick_at`, or a `late` one, sets
        `last_fired_at` and `last_outcome`, `last_run_id` when it made a run (and counts it in
        `fire_count`); `last_tick_at` only moves forward. False (nothing changed) for a tick
        not newer and not late: a handling recorded twice, or out of order."""
        ...

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        """Delete the tenant's schedule, whether its row reads or not; False when absent or foreign."""
        ...

    # Retention
    async def purge(
        self, kind: DurableRecordKind, older_than: datetime, limit: int = DEFAULT_PURGE_BATCH
    ) -> int:
        """Delete up to `limit` records of `kind` older than `older_than`; returns how many went.

        Age: ledger recorded_at, trace span end, forensics recorded_at, terminal snapshot
        created_at (its execution's payloads and archived steps go with it), run record ended_at
        (run-index history by recorded_at, with the run records).
        """
        ...

    # Lifecycle
    async def health(self) -> None:
        """Return when the store answers; StoreUnavailableError when it does not."""
        ...

    async def probe_write(self) -> None:
        """Write (upsert) the one readiness probe record; StoreUnavailableError when refused."""
        ...

    async def close(self) -> None: ...
