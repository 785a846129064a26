"""Models of shared runs, shared queue items, dispatch and pump results.

Owns the SharedRun statuses (Submitted, QueuedGlobally, Dispatched, ScaleOutRequested,
Rejected, Cancelled, Failed), submit modes, queue item statuses, the shared run record as
stored in Redis, pump identity and the results of one dispatch attempt and one pump cycle.
Must not hold behaviour beyond (de)serialization.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import admission_group
from runtime_core.pipeline import PipelineDefinition, parse_stored_pipeline


class SharedRunStatus(StrEnum):
    SUBMITTED = "Submitted"
    QUEUED_GLOBALLY = "QueuedGlobally"
    DISPATCHED = "Dispatched"
    SCALE_OUT_REQUESTED = "ScaleOutRequested"
    REJECTED = "Rejected"
    CANCELLED = "Cancelled"
    FAILED = "Failed"


class SubmitMode(StrEnum):
    QUEUE_FIRST = "QueueFirst"
    DIRECT_DISPATCH = "DirectDispatch"


class QueueItemStatus(StrEnum):
    PENDING = "Pending"
    HELD = "Held"  # waiting in its concurrency key's line (no queue turn)
    CLAIMED = "Claimed"
    DISPATCHED = "Dispatched"
    CANCELLED = "Cancelled"
    FAILED = "Failed"


_OPTIONAL_TEXT_FIELDS = (
    "local_run_id",
    "assigned_runtime_instance_id",
    "provider_name",
    "pump_runtime_instance_id",
    "pump_worker_id",
    "scale_out_request_id",
    "admission_decision",
    "admission_reason",
    "failure_reason",
    "last_requeue_reason",
    "cancelled_by",
    "resume_execution_id",
    "recovered_from_runtime_instance_id",
    "trace_context",
    "queue_status",
    "callback_url",
    "flow_key",
    "flow_strategy",
    "concurrency_key",
    "dispatch_limits",
)
_OPTIONAL_INT_FIELDS = (
    "updated_at_ms",
    "dispatched_at_ms",
    "reservation_expires_at_ms",
    "archived_at_ms",
    "priority",
    "flow_limit",
)


class SharedRunRecord(BaseModel):
    """A shared run: the submitted request, its snapshot, and where it went (never its ExecutionId).

    Only recovery sets `resume_execution_id`: the in-flight execution the next dispatch must
    continue after its runtime instance became unsafe. `callback_url` is the submit's webhook
    URL (already allow-listed for the tenant), if any. `trace_context` is the run's encoded
    `RunTraceContext` (its `invoke_workflow` span), set at submit when there is a trace to continue.
    `priority`: the submit's priority (None: the default), read by the queue scripts.
    """

    shared_run_id: str
    status: SharedRunStatus
    submit_mode: SubmitMode
    tenant_id: str
    snapshot: ExecutionContextSnapshot | None
    pipeline: PipelineDefinition
    input: dict[str, Any] = Field(default_factory=dict)
    created_at_ms: int = 0
    updated_at_ms: int | None = None
    dispatched_at_ms: int | None = None
    reservation_expires_at_ms: int | None = None
    local_run_id: str | None = None
    assigned_runtime_instance_id: str | None = None
    provider_name: str | None = None
    pump_runtime_instance_id: str | None = None
    pump_worker_id: str | None = None
    scale_out_request_id: str | None = None
    admission_decision: str | None = None
    admission_reason: str | None = None
    failure_reason: str | None = None
    last_requeue_reason: str | None = None
    cancelled_by: str | None = None
    resume_execution_id: str | None = None
    recovered_from_runtime_instance_id: str | None = None
    trace_context: str | None = None
    # Set when the run finished and its durable run record answers for it (its hot record expires).
    archived_at_ms: int | None = None
    queue_status: str | None = None
    callback_url: str | None = None
    priority: int | None = None
    # Per-key concurrency (`runtime_core.flow.KeyPlacement`): the key's id, limit and strategy,
    # and the key as `<expression>=<value>` for people to read.
    flow_key: str | None = None
    flow_limit: int | None = None
    flow_strategy: str | None = None
    concurrency_key: str | None = None
    # The tenant's dispatch rate limits (`runtime_core.flow.dispatch_cells`, as a script argument).
    dispatch_limits: str | None = None

    @property
    def submitted_by(self) -> str:
        return self.snapshot.user_id if self.snapshot else ""

    def creation_fields(self) -> dict[str, str]:
        """The string fields a Lua script writes when it creates the record."""
        fields = {
            "shared_run_id": self.shared_run_id,
            "submit_mode": self.submit_mode.value,
            "tenant_id": self.tenant_id,
            "snapshot": self.snapshot.to_json() if self.snapshot else "",
            "pipeline": self.pipeline.to_json(),
            "input": json.dumps(self.input, sort_keys=True),
            "admission_group": admission_group(self.snapshot) if self.snapshot else "",
            # Copies a run listing filters on without parsing the pipeline or the snapshot.
            "pipeline_name": self.pipeline.name,
            "submitted_by": self.submitted_by,
        }
        optional = {
            "callback_url": self.callback_url,
            "trace_context": self.trace_context,
            "priority": None if self.priority is None else str(self.priority),
            "flow_key": self.flow_key,
            "flow_limit": None if self.flow_limit is None else str(self.flow_limit),
            "flow_strategy": self.flow_strategy,
            "concurrency_key": self.concurrency_key,
            "dispatch_limits": self.dispatch_limits,
        }
        return fields | {name: value for name, value in optional.items() if value}

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> SharedRunRecord:
        values: dict[str, Any] = {
            "shared_run_id": raw["shared_run_id"],
            "status": raw["status"],
            "submit_mode": raw["submit_mode"],
            "tenant_id": raw["tenant_id"],
            "snapshot": ExecutionContextSnapshot.from_json(raw["snapshot"]) if raw.get("snapshot") else None,
            "pipeline": parse_stored_pipeline(raw["pipeline"]),
            "input": json.loads(raw.get("input") or "{}"),
            "created_at_ms": int(raw.get("created_at_ms") or 0),
        }
        values.update({name: raw[name] for name in _OPTIONAL_TEXT_FIELDS if raw.get(name)})
        values.update({name: int(raw[name]) for name in _OPTIONAL_INT_FIELDS if raw.get(name)})
        return cls.model_validate(values)


_SUMMARY_FIELDS = (
    "shared_run_id",
    "tenant_id",
    "status",
    "submit_mode",
    "pipeline_name",
    "submitted_by",
    "created_at_ms",
    "failure_reason",
    "local_run_id",
)


class SharedRunSummary(BaseModel):
    """The few fields of a shared run a listing shows and filters on (no pipeline, no input)."""

    shared_run_id: str
    tenant_id: str
    status: SharedRunStatus
    submit_mode: SubmitMode
    pipeline_name: str
    submitted_by: str
    created_at_ms: int
    failure_reason: str | None = None
    local_run_id: str | None = None

    FIELDS: ClassVar[tuple[str, ...]] = _SUMMARY_FIELDS

    @classmethod
    def from_values(cls, values: list[str | None]) -> SharedRunSummary:
        """From an HMGET of `FIELDS` on a record with the listing copies (`creation_fields`)."""
        raw = dict(zip(_SUMMARY_FIELDS, values, strict=True))
        return cls.model_validate({name: value for name, value in raw.items() if value is not None})


class QueueItem(BaseModel):
    shared_run_id: str
    status: QueueItemStatus
    seq: int
    attempts: int = 0
    enqueued_at_ms: int = 0
    claimed_by: str | None = None
    claimed_at_ms: int | None = None
    lease_until_ms: int | None = None
    dispatched_at_ms: int | None = None
    last_requeue_reason: str | None = None
    priority: int | None = None
    arrival: int | None = None
    """The sequence it was queued with (`seq` is the turn it holds; see lib/pending_index)."""


class PumpIdentity(BaseModel):
    """WHO drains the queue; never, by itself, who receives the run.

    A pump cycle dispatches runs of every tenant, so its identity names no user. The caller of
    a manual drain (`requested_by_*`) is recorded only on runs of the caller's own tenant.
    `incarnation`: the start of the control plane the pump runs in; a control plane that
    starts again expires the claims its previous incarnations left.
    """

    pump_runtime_instance_id: str
    pump_worker_id: str
    incarnation: str = ""
    requested_by_tenant_id: str | None = None
    requested_by_user_id: str | None = None

    @property
    def claimer(self) -> str:
        claimer = f"{self.pump_runtime_instance_id}/{self.pump_worker_id}"
        return f"{claimer}@{self.incarnation}" if self.incarnation else claimer

    def attributes_for(self, run_tenant_id: str | None) -> dict[str, str]:
        """What a run of `run_tenant_id` records about who drained it (never another tenant's user)."""
        attributes = {
            "pump.runtime.instance.id": self.pump_runtime_instance_id,
            "pump.worker.id": self.pump_worker_id,
        }
        if self.requested_by_user_id and run_tenant_id == self.requested_by_tenant_id:
            attributes["pump.requested_by"] = self.requested_by_user_id
        return attributes


class QueueClaim(BaseModel):
    """One claim of a queue item. The token is also the id of the claim's dispatch attempt;
    `unsettled` lists the attempts of earlier claims whose lease expired (their pump died):
    one of them may have been accepted by an instance."""

    shared_run_id: str
    token: str
    attempts: int
    claimed_at_ms: int
    pump: PumpIdentity
    unsettled: list[str] = Field(default_factory=list)
    sequence: int = 0
    """The queue sequence of the turn it took (claims of several partitions sort by it)."""


class DispatchOutcome(StrEnum):
    DISPATCHED = "Dispatched"
    EMPTY = "Empty"
    NO_CAPACITY = "NoCapacity"
    FAILED = "DispatchFailed"
    ABANDONED = "Abandoned"
    CLAIM_LOST = "ClaimLost"


class DispatchResult(BaseModel):
    """One dispatcher attempt; `success` only when the run reached a local queue and was marked."""

    outcome: DispatchOutcome
    shared_run_id: str | None = None
    tenant_id: str | None = None
    admission_group: str | None = None
    assigned_runtime_instance_id: str | None = None
    local_run_id: str | None = None
    reason: str = ""

    @property
    def success(self) -> bool:
        return self.outcome is DispatchOutcome.DISPATCHED


class PumpStopReason(StrEnum):
    MAX_COUNT = "MaxDispatchCount"
    EMPTY = "QueueEmpty"
    FAILURE = "DispatchFailed"
    NO_CAPACITY = "NoCapacity"
    CANCELLED = "Cancelled"


class PumpRequest(BaseModel):
    max_dispatch_count: int = Field(default=100, ge=1)
    stop_on_failure: bool = False
    pump: PumpIdentity


class PumpResult(BaseModel):
    """`retry_after_ms`: a tenant's dispatch rate limit held runs back; the soonest they conform."""

    attempts: list[DispatchResult] = Field(default_factory=list)
    stop_reason: PumpStopReason
    retry_after_ms: int | None = None

    @property
    def dispatched(self) -> list[DispatchResult]:
        return [a for a in self.attempts if a.success]
