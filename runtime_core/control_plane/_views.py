"""Result models of the control plane facade (what MCP tools and the CLI shape and return)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from runtime_core.errors import InvalidArgumentError
from runtime_core.instances import InstanceEntry, InstanceHealth, IsolationMode


def _not_live_status(entry: InstanceEntry) -> str:
    """Unsafe / Recovered when the health reconciler marked it, else Stale (heartbeat lapsed)."""
    return "Stale" if entry.health is InstanceHealth.HEALTHY else entry.health.value


class InstanceView(BaseModel):
    """One runtime instance with every registry and capacity field of seed 001's list."""

    runtime_instance_id: str
    role: str
    status: str
    live: bool
    worker_count: int
    active_workers: int
    available_workers: int
    max_local_workers_per_execution: int
    queued: int
    running: int
    active_runs: int
    queue_capacity: int
    max_concurrent_runs: int
    available_run_slots: int
    reserved_run_slots: int
    queue_paused: bool
    can_accept_run: bool
    registered_at_ms: int
    last_heartbeat_at_ms: int
    snapshot_at_ms: int
    tenant_id: str | None
    tenant_group_id: str | None
    isolation_mode: IsolationMode
    prefer_dedicated_capacity: bool
    allow_shared_fallback: bool
    runtime_instance_id_prefix: str
    provider_name: str
    transport_name: str
    provider_endpoint: str
    # Execution assistance: the effective worker count it offers to another instance's
    # execution, and whom it assists now (counts only: the executions may be other tenants').
    assistance_workers: int = 0
    assisting_executions: int = 0
    assisting_workers: int = 0

    @classmethod
    def of(cls, entry: InstanceEntry) -> InstanceView:
        d, c = entry.descriptor, entry.capacity
        return cls(
            runtime_instance_id=d.runtime_instance_id,
            role=d.role,
            status=d.status if entry.live else _not_live_status(entry),
            live=entry.live,
            worker_count=c.worker_count,
            active_workers=c.active_workers,
            available_workers=c.available_workers,
            max_local_workers_per_execution=c.max_local_workers_per_execution,
            queued=c.queued,
            running=c.running,
            active_runs=c.active_runs,
            queue_capacity=c.queue_capacity,
            max_concurrent_runs=c.max_concurrent_runs,
            available_run_slots=c.available_run_slots,
            reserved_run_slots=entry.reserved_slots,
            queue_paused=c.queue_paused,
            can_accept_run=c.can_accept_run,
            registered_at_ms=entry.registered_at_ms,
            last_heartbeat_at_ms=entry.heartbeat_at_ms,
            snapshot_at_ms=c.snapshot_at_ms,
            tenant_id=d.tenant_id,
            tenant_group_id=d.tenant_group_id,
            isolation_mode=d.isolation_mode,
            prefer_dedicated_capacity=d.prefer_dedicated_capacity,
            allow_shared_fallback=d.allow_shared_fallback,
            runtime_instance_id_prefix=d.runtime_instance_id_prefix,
            provider_name=d.provider_name,
            transport_name=c.transport_name,
            provider_endpoint=d.provider_endpoint,
            assistance_workers=c.assistance_workers if entry.live else 0,
            assisting_executions=c.assisting_executions,
            assisting_workers=c.assisting_workers,
        )


class TenantCapacityView(BaseModel):
    """One runtime instance as a tenant may see it: its size and state always, its activity (busy
    workers, queued and running runs, free slots) only when the instance serves that tenant alone.
    Shared and group capacity also carries other tenants' runs, so those figures are withheld
    (None) rather than revealing their activity."""

    runtime_instance_id: str
    status: str
    live: bool
    isolation_mode: IsolationMode
    dedicated_to_tenant: bool
    worker_count: int
    max_concurrent_runs: int
    queue_capacity: int
    queue_paused: bool
    last_heartbeat_at_ms: int
    provider_name: str
    transport_name: str
    active_workers: int | None = None
    queued: int | None = None
    running: int | None = None
    available_run_slots: int | None = None
    can_accept_run: bool | None = None

    @classmethod
    def of(cls, entry: InstanceEntry, tenant_id: str) -> TenantCapacityView:
        d, c = entry.descriptor, entry.capacity
        owned = d.tenant_id == tenant_id and not d.tenant_group_id  # a group's instance serves several
        dedicated = owned and d.isolation_mode is not IsolationMode.SHARED
        activity = (
            {
                "active_workers": c.active_workers,
                "queued": c.queued,
                "running": c.running,
                "available_run_slots": max(0, c.available_run_slots - entry.reserved_slots),
                "can_accept_run": c.can_accept_run,
            }
            if dedicated
            else {}
        )
        return cls(
            runtime_instance_id=d.runtime_instance_id,
            status=d.status if entry.live else _not_live_status(entry),
            live=entry.live,
            isolation_mode=d.isolation_mode,
            dedicated_to_tenant=dedicated,
            worker_count=c.worker_count,
            max_concurrent_runs=c.max_concurrent_runs,
            queue_capacity=c.queue_capacity,
            queue_paused=c.queue_paused,
            last_heartbeat_at_ms=entry.heartbeat_at_ms,
            provider_name=d.provider_name,
            transport_name=c.transport_name,
            **activity,
        )


class DrainedRun(BaseModel):
    shared_run_id: str
    outcome: str
    assigned_runtime_instance_id: str | None = None
    local_run_id: str | None = None
    reason: str = ""


class DrainResult(BaseModel):
    """One manual drain, as the caller's tenant sees it: counts, pending and `runs` cover only the
    caller tenant's runs (the pump may also have dispatched other tenants' runs)."""

    attempted: int
    dispatched: int
    failed: int
    no_capacity: int
    stop_reason: str
    pending_after: int
    runs: list[DrainedRun] = Field(default_factory=list)


class StepErrorView(BaseModel):
    """A step's last recorded failure (kept after a later successful retry)."""

    code: str
    message: str
    reason: str = ""
    at: datetime | None = None


class StepRow(BaseModel):
    """`output` / `output_length`: while a streaming step runs, its text so far (the last 16 KiB)
    and how many characters it wrote. `agent`: the sub-steps of an `ai.agent` step (model turns
    and tool calls, with inputs, outputs, usage and timing) while its run is live."""

    name: str
    step_key: str
    status: str
    retry_count: int
    recovery_count: int
    last_error: StepErrorView | None = None
    next_retry_at: datetime | None = None
    started_at: datetime | None = Field(None, description="While Running: when its current attempt began.")
    output: str | None = None
    output_length: int | None = None
    agent: list[dict[str, Any]] | None = None


DEFAULT_STEP_PAGE_SIZE = 100
MAX_STEP_PAGE_SIZE = 1_000


class StepPage(BaseModel):
    """Which steps a status read lists: `size` of them from position `cursor` on, in the
    pipeline's order (a run's summary counts every step whatever the page). `size` None: every
    step from `cursor` on (the run views that draw or summarise the whole DAG; never a tool's
    caller, whose pages are bounded by MAX_STEP_PAGE_SIZE)."""

    model_config = ConfigDict(frozen=True)

    cursor: int = Field(default=0, ge=0)
    size: int | None = Field(default=DEFAULT_STEP_PAGE_SIZE, ge=1, le=MAX_STEP_PAGE_SIZE)

    @classmethod
    def every_step(cls) -> StepPage:
        return cls(size=None)

    @classmethod
    def at(cls, cursor: str | None, size: int | None = None) -> StepPage:
        """The page a `next_steps_cursor` (None: the first page) names."""
        if cursor is not None and not (cursor.isdigit() and len(cursor) <= 9):
            raise InvalidArgumentError(
                f"steps_cursor '{cursor[:40]}' is not a cursor this server gave.",
                hint="Pass the next_steps_cursor of the previous answer, or leave it out for the first page.",
            )
        return cls(cursor=int(cursor or 0), size=size or DEFAULT_STEP_PAGE_SIZE)

    def names(self, steps: Sequence[Any]) -> list[str]:
        """The names of the page's steps among `steps` (objects with a `name`, in order)."""
        end = None if self.size is None else self.cursor + self.size
        return [step.name for step in steps[self.cursor : end]]

    def next_cursor(self, total: int) -> str | None:
        """The cursor of the page after this one (None: this page reaches the last step)."""
        if self.size is None:
            return None
        following = self.cursor + self.size
        return str(following) if following < total else None


class WaitingInputView(BaseModel):
    """What a run waiting for human input needs: an answer under `key` matching `expected_input`."""

    key: str
    step: str | None = None
    prompt: str = ""
    expected_input: dict[str, Any] = Field(default_factory=dict)
    since: datetime | None = Field(None, description="When the run began waiting.")


class AssistantView(BaseModel):
    """A runtime instance that assisted the run's execution (execution assistance)."""

    runtime_instance_id: str
    effective_workers: int
    active: bool
    joined_at: datetime
    left_at: datetime | None = None
    left_reason: str | None = None
    steps_completed: int = 0


class RunStatusView(BaseModel):
    """Every identity and status of one run, as its own tenant may read them.

    `attempt_superseded` (set by the reader, not part of the answer): the local run shown is
    not the one the shared run is dispatched to now (an older attempt, asked for by its id).
    """

    requested_id: str
    tenant_id: str
    shared_run_id: str | None = None
    local_run_id: str | None = None
    execution_id: str | None = None
    shared_status: str | None = None
    queue_status: str | None = None
    submit_mode: str | None = None
    assigned_runtime_instance_id: str | None = None
    pump_runtime_instance_id: str | None = None
    pump_worker_id: str | None = None
    scale_out_request_id: str | None = None
    local_status: str | None = None
    effective_workers: int | None = None
    execution_status: str | None = None
    control_status: str | None = None
    waiting_key: str | None = None
    waiting_input: WaitingInputView | None = None
    failure_reason: str | None = None
    failed_step: str | None = None
    parent_call: str | None = None
    submitted_at: datetime | None = None
    started_at: datetime | None = Field(None, description="When its (latest) local run started executing.")
    ended_at: datetime | None = None
    assistants: list[AssistantView] = Field(default_factory=list)
    # The run's steps: how many, how many in each status, the row of the step that failed the
    # run, and one page of their rows (`steps`, pipeline order; the next page from
    # `next_steps_cursor`, None on the last).
    steps_total: int = 0
    step_counts: dict[str, int] = Field(default_factory=dict)
    failed_step_row: StepRow | None = None
    steps: list[StepRow] = Field(default_factory=list)
    next_steps_cursor: str | None = None
    result: Any = None
    _attempt_superseded: bool = PrivateAttr(default=False)

    def mark_attempt_superseded(self) -> None:
        self._attempt_superseded = True

    @property
    def attempt_superseded(self) -> bool:
        return self._attempt_superseded


TERMINAL_RUN_STATUSES = frozenset({"Completed", "Failed", "Cancelled", "Rejected"})


def run_final_status(view: RunStatusView) -> str | None:
    """The status of the most advanced identity: the execution, else the local run, else the shared run."""
    return view.execution_status or view.local_status or view.shared_status


# Shared run statuses of a run that waits to be dispatched (again): whatever an earlier local
# attempt says, the run is not finished.
AWAITING_DISPATCH_STATUSES = frozenset({"Submitted", "QueuedGlobally", "ScaleOutRequested"})


def run_is_done(view: RunStatusView) -> bool:
    """Terminal by its most advanced identity, its local run (if any) closed, and the shared run
    agreeing: finished for good.

    A finished execution whose local run is not closed yet is not done: the instance closes
    the local run only after the engine's observers ran, so once done the run's ledger,
    trace and snapshot are all written. A local attempt that ended while its shared run was
    queued again (recovery requeued it, its pump died mid-dispatch) or dispatched to another
    local run is not done either.
    """
    if view.shared_status in AWAITING_DISPATCH_STATUSES or view.attempt_superseded:
        return False
    local_open = view.local_status is not None and view.local_status not in TERMINAL_RUN_STATUSES
    return run_final_status(view) in TERMINAL_RUN_STATUSES and not local_open


class CancelResult(BaseModel):
    requested_id: str
    shared_run_id: str | None = None
    local_run_id: str | None = None
    execution_id: str | None = None
    shared_status: str | None = None
    local_status: str | None = None
    message: str
