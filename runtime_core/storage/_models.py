"""Durable record models: the rows every DurableStore backend reads and writes.

Owns the pydantic shapes of terminal snapshots, payload references, archived steps, ledger
entries, trace spans, forensics records, run-index events and run records (with the query
and cursor of a run listing and the record kinds a retention purge can expire), schedules
(with a page of a tenant's listing and of the scheduler's scan: each reports the rows that
do not read as a schedule instead of failing), and the UTC datetime rule. Must not know how
any backend stores them.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from runtime_core.errors import error_description


def _to_utc_milliseconds(value: datetime) -> datetime:
    # MongoDB keeps milliseconds only; truncating here makes every backend round-trip exactly.
    if value.tzinfo is None:
        raise ValueError("datetimes must be timezone-aware (use datetime.now(UTC))")
    utc = value.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


UtcDatetime = Annotated[datetime, AfterValidator(_to_utc_milliseconds)]


def utc_now() -> datetime:
    return _to_utc_milliseconds(datetime.now(UTC))


def _nonzero_otel_id(value: str) -> str:
    if not value.strip("0"):
        raise ValueError("an all-zero trace or span id is invalid in OpenTelemetry")
    return value


TraceId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$"), AfterValidator(_nonzero_otel_id)]
SpanId = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$"), AfterValidator(_nonzero_otel_id)]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TerminalSnapshot(_Record):
    """Normalized DAG state of one execution at its terminal status; written once."""

    execution_id: str
    tenant_id: str
    pipeline_name: str
    pipeline_version: str
    status: str
    snapshot: dict[str, Any]
    fingerprint: str
    created_at: UtcDatetime = Field(default_factory=utc_now)


class PayloadRef(_Record):
    """What the hot state keeps in place of an externalized payload."""

    payload_id: str
    size: int
    sha256: str


class ArchivedStep(_Record):
    """A step's durable copy after retention compacted or evicted it from Redis."""

    execution_id: str
    tenant_id: str
    step_name: str
    status: str
    retry_count: int = 0
    result_ref: PayloadRef | None = None
    result: Any = None
    archived_at: UtcDatetime = Field(default_factory=utc_now)

    @model_validator(mode="after")
    def _one_result_form(self) -> ArchivedStep:
        if self.result_ref is not None and self.result is not None:
            raise ValueError("an archived step keeps either result_ref or an inline result, not both")
        return self


class LedgerEntry(_Record):
    """One append-only audit event; ordered by recorded_at, then sequence."""

    entry_id: str = Field(default_factory=lambda: _new_id("led"))
    tenant_id: str
    execution_id: str | None = None
    shared_run_id: str | None = None
    local_run_id: str | None = None
    runtime_instance_id: str | None = None
    assigned_runtime_instance_id: str | None = None
    event: str
    step_name: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    recorded_at: UtcDatetime = Field(default_factory=utc_now)
    sequence: int = 0


class TraceSpan(_Record):
    """A finished span with OpenTelemetry-compatible ids (lowercase hex, not all zero)."""

    trace_id: TraceId
    span_id: SpanId
    parent_span_id: SpanId | None = None
    tenant_id: str
    execution_id: str
    step_name: str | None = None
    name: str
    start_ns: int
    end_ns: int
    status: str
    attributes: dict[str, Any] = Field(default_factory=dict)


class ForensicsRecord(_Record):
    """What recovery did with one in-flight execution or local-queued run, and why."""

    record_id: str = Field(default_factory=lambda: _new_id("frn"))
    tenant_id: str
    runtime_instance_id: str
    shared_run_id: str | None = None
    execution_id: str | None = None
    kind: str
    action: str
    detail: dict[str, Any] = Field(default_factory=dict)
    recorded_at: UtcDatetime = Field(default_factory=utc_now)


class RunIndexEvent(_Record):
    """One change of the run-execution index (shared run -> local run -> execution -> instance)."""

    event_id: str = Field(default_factory=lambda: _new_id("rix"))
    tenant_id: str
    shared_run_id: str | None = None
    local_run_id: str | None = None
    execution_id: str | None = None
    runtime_instance_id: str | None = None
    status: str
    recorded_at: UtcDatetime = Field(default_factory=utc_now)


class RunRecordStepError(_Record):
    """A step's last recorded failure: code, message, the retry decision's reason, when."""

    code: str
    message: str
    reason: str = ""
    at: UtcDatetime | None = None


class RunRecordStep(_Record):
    """One step row of a finished run, as `run.status` shows it; `failed_the_run` marks the step
    whose failure failed it."""

    name: str
    step_key: str
    status: str
    retry_count: int = 0
    recovery_count: int = 0
    last_error: RunRecordStepError | None = None
    failed_the_run: bool = False


class RunRecord(_Record):
    """A finished run, kept durably once its hot state may leave Redis.

    Carries the shared run (ids, statuses, who submitted it, where it went), the local attempt
    that ended it and its execution's summary: step rows and `result`, the sink steps' results
    in their stored form (inline values or payload references, decoded by the result codec).
    `status` is the most advanced of the execution, local and shared statuses.
    """

    shared_run_id: str
    tenant_id: str
    local_run_id: str | None = None
    execution_id: str | None = None
    pipeline_name: str
    pipeline_version: str
    submitted_by: str
    submit_mode: str
    status: str
    shared_status: str
    queue_status: str | None = None
    local_status: str | None = None
    execution_status: str | None = None
    control_status: str | None = None
    failure_reason: str | None = None
    assigned_runtime_instance_id: str | None = None
    pump_runtime_instance_id: str | None = None
    pump_worker_id: str | None = None
    scale_out_request_id: str | None = None
    snapshot: dict[str, Any]
    steps: list[RunRecordStep] = Field(default_factory=list)
    result: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime
    dispatched_at: UtcDatetime | None = None
    started_at: UtcDatetime | None = None
    ended_at: UtcDatetime
    archived_at: UtcDatetime = Field(default_factory=utc_now)


class RunRecordCursor(_Record):
    """Where a newest-first run listing stopped: the last row's (created_at, shared_run_id)."""

    created_at: UtcDatetime
    shared_run_id: str


class RunRecordQuery(_Record):
    """Filters of a run listing (all optional, combined with AND), newest first; with
    `oldest_first` (a page towards newer runs, after the cursor `after`) oldest first."""

    shared_status: str | None = None
    status: str | None = None
    pipeline_name: str | None = None
    submitted_by: str | None = None
    created_after: UtcDatetime | None = None
    created_before: UtcDatetime | None = None
    before: RunRecordCursor | None = None
    after: RunRecordCursor | None = None
    oldest_first: bool = False
    limit: int = Field(default=50, ge=1, le=1000)


class SubmittedRun(_Record):
    """A shared run's request, kept durably from its submit until the run is archived.

    The one durable trace of a run that was queued and never dispatched: when Redis loses its
    dataset, a control plane queues the run again from this copy, under the same SharedRunId.
    `run` is the shared run record as it was created (pipeline, input, snapshot, submit mode),
    opaque to the store.
    """

    shared_run_id: str
    tenant_id: str
    run: dict[str, Any]
    submitted_at: UtcDatetime = Field(default_factory=utc_now)


class DurableRecordKind(StrEnum):
    """The record classes a retention purge expires, each by its own age."""

    LEDGER = "ledger"
    TRACE = "trace"
    FORENSICS = "forensics"
    SNAPSHOTS = "snapshots"
    RUN_RECORDS = "run_records"  # with the run-index history and the submitted runs


class ScheduleRecord(_Record):
    """A tenant's schedule of one pipeline with one input, as the durable store keeps it.

    `spec` (when it fires, catch-up and overlap policies), `pipeline` (its definition) and
    `snapshot` (who created it: the runs it fires act for that principal) are opaque to the
    store. `name` is unique within the tenant. `status` is `active` or `paused`;
    `status_changed_at` is when it was created or last paused / resumed (ticks before a
    resume are never fired). `last_tick_at` is the newest tick handled; `last_fired_at` and
    `last_outcome` describe the latest handling (a waiting tick fired late included),
    `last_run_id` the newest run a tick made; `fire_count` counts every run a tick made.
    """

    schedule_id: str
    tenant_id: str
    name: str
    spec: dict[str, Any]
    pipeline: dict[str, Any]
    input: dict[str, Any] = Field(default_factory=dict)
    snapshot: dict[str, Any]
    status: str = "active"
    created_at: UtcDatetime = Field(default_factory=utc_now)
    status_changed_at: UtcDatetime = Field(default_factory=utc_now)
    last_tick_at: UtcDatetime | None = None
    last_fired_at: UtcDatetime | None = None
    last_run_id: str | None = None
    last_outcome: str | None = None
    fire_count: int = 0


class ScheduleFire(_Record):
    """One handled tick of a schedule: its tick time, when it was handled, the run it made
    (None when the overlap policy skipped or queued it) and the outcome's name. `late`: a
    tick that waited (overlap queue_one) fired now, after newer ticks were handled."""

    tick_at: UtcDatetime
    fired_at: UtcDatetime = Field(default_factory=utc_now)
    run_id: str | None = None
    outcome: str
    late: bool = False


@dataclass(frozen=True)
class UnreadableSchedule:
    """A stored schedule that does not read: its row is not a ScheduleRecord, or its `spec` is
    not a valid schedule spec. Its id, its name when that reads, and what is wrong (a
    value-free description: the row may hold secrets). It can only be deleted."""

    schedule_id: str
    problem: str
    name: str | None = None


@dataclass(frozen=True)
class ScheduleScan:
    """One page of the scheduler's scan of active schedules: the records, the rows that did not
    read, and the id of the page's last row to page on from (None: the page was not full, the
    scan is over)."""

    records: tuple[ScheduleRecord, ...]
    unreadable: tuple[UnreadableSchedule, ...] = ()
    last_id: str | None = None


@dataclass(frozen=True)
class SchedulePage:
    """One page of a tenant's schedules by name: the records, the rows that did not read, and
    the name of the page's last row to page on from (None: the page was not full, the listing
    is over)."""

    records: tuple[ScheduleRecord, ...]
    unreadable: tuple[UnreadableSchedule, ...] = ()
    last_name: str | None = None


RowT = TypeVar("RowT")


@dataclass(frozen=True)
class ScheduleRows(Generic[RowT]):
    """How a backend reads its stored schedule rows: as a record (`read`), or, for a row that
    does not read, as an UnreadableSchedule (`id_of`, `name_of`: what still reads of it)."""

    read: Callable[[RowT], ScheduleRecord]
    id_of: Callable[[RowT], str]
    name_of: Callable[[RowT], str | None]

    def one(self, row: RowT) -> ScheduleRecord | UnreadableSchedule:
        try:
            return self.read(row)
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError, a bad JSON column
            return UnreadableSchedule(self.id_of(row), error_description(exc), self.name_of(row))

    def _split(
        self, rows: Sequence[RowT]
    ) -> tuple[tuple[ScheduleRecord, ...], tuple[UnreadableSchedule, ...]]:
        read = [self.one(row) for row in rows]
        return (
            tuple(found for found in read if isinstance(found, ScheduleRecord)),
            tuple(found for found in read if isinstance(found, UnreadableSchedule)),
        )

    def scan(self, rows: Sequence[RowT], limit: int) -> ScheduleScan:
        """A ScheduleScan of at most `limit` stored rows (in id order)."""
        records, unreadable = self._split(rows)
        return ScheduleScan(records, unreadable, self.id_of(rows[-1]) if len(rows) >= limit else None)

    def page(self, rows: Sequence[RowT], limit: int) -> SchedulePage:
        """A SchedulePage of at most `limit` stored rows (in name order)."""
        records, unreadable = self._split(rows)
        return SchedulePage(records, unreadable, self.name_of(rows[-1]) if len(rows) >= limit else None)
