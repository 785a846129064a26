"""The shared runtime controller: create shared runs and apply the submit mode.

Owns submission, the one path every new shared run takes (the `submit` tool, schedules, an
agent's child runs). QueueFirst: the run is created QueuedGlobally with a Pending item (no
LocalRunId, no ExecutionId). DirectDispatch (a controller given `DirectAdmission`: a control
plane's; without it every submit is queued first): the run is created Submitted and the real
admission decision is kept: AssignToInstance delivers at once (falling back to the queue
if delivery fails), QueueGlobally queues it, RequestScaleOut marks it ScaleOutRequested
and persists a scale-out request with the tenant settings, Reject marks it Rejected. The
input is checked (`check_input`) and the pipeline validated before anything is created. The
caller's snapshot is persisted on the run and restored around admission, and the run's
trace context (its `invoke_workflow` span, child of the caller's current span) is allocated
with it. An idempotency key is claimed by the script that creates the run: a key the tenant
already used within its window returns that run (`deduplicated`) or, for a different
request, a conflict; either way nothing is created. The tenant's and the pipeline's submit
rate limits are taken by that same script: a limited submit creates nothing and answers
`[rate_limited]` with the time to retry. A new run's request is handed to
`keep_copy` (its durable copy) before the run can be dispatched. Must not execute.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from runtime_core.errors import ConflictError, MissingSnapshotError
from runtime_core.flow import (
    ConcurrencyKey,
    PipelineFlow,
    TenantRateLimits,
    cells_json,
    dispatch_cells,
    place_key,
    submit_cells,
    submit_refused,
)
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.instances import AdmissionController, AdmissionDecision, AdmissionKind
from runtime_core.observability import allocate_run_trace
from runtime_core.pipeline import PipelineDefinition
from runtime_core.queueing._delivery import RunDelivery
from runtime_core.queueing._idempotency import (
    IdempotencyConflictError,
    IdempotencyKey,
    IdempotentRunGoneError,
)
from runtime_core.queueing._journal import SharedRunJournal
from runtime_core.queueing._models import (
    DispatchOutcome,
    QueueItemStatus,
    SharedRunRecord,
    SharedRunStatus,
    SubmitMode,
)
from runtime_core.queueing._queue import QueueOutcome, QueueTransition, SharedQueue
from runtime_core.queueing._run_store import RunTransition, SharedRunStore, TransitionOutcome
from runtime_core.queueing._scale_out import ScaleOutRequestStore, new_scale_out_request_id

PipelineValidator = Callable[[PipelineDefinition], None]
InputCheck = Callable[[dict[str, Any]], None]
"""Refuses a run input the engine would not take (not a JSON object, too large)."""
TenantPipelineCheck = Callable[[PipelineDefinition, ExecutionContextSnapshot], Awaitable[None]]
"""The submit-time checks that depend on the submitting tenant (`DagEngine.check_for_tenant`)."""
KeyEvictions = Callable[[list[str], ExecutionContextSnapshot], Awaitable[None]]
"""Cancel the given shared runs of the snapshot's tenant (cancel-in-progress: the newest win)."""
log = logging.getLogger("runtime_core.queueing")


def _created(queued: QueueTransition, record: SharedRunRecord) -> QueueTransition:
    """The creation of a new run as applied when the run exists: its id is fresh and random, so
    only this very call made it. That happens when the client lost the script's reply and sent
    it again (redis-py retries a command whose connection failed mid-reply; on a Redis Cluster
    also when another task's error re-initialises the connections)."""
    if queued.outcome is not QueueOutcome.REFUSED:
        return queued
    log.info(
        "shared_run.create_resent shared_run_id=%s status=%s",
        record.shared_run_id,
        queued.detail,
        extra={"shared_run_id": record.shared_run_id, "tenant_id": record.tenant_id},
    )
    return replace(queued, outcome=QueueOutcome.APPLIED)


class SubmitResult(BaseModel):
    """`deduplicated`: the idempotency key had already made this run; nothing new was submitted."""

    shared_run_id: str
    status: SharedRunStatus
    submit_mode: SubmitMode
    admission_decision: str | None = None
    reason: str = ""
    assigned_runtime_instance_id: str | None = None
    local_run_id: str | None = None
    scale_out_request_id: str | None = None
    deduplicated: bool = False


_KEY_USED = frozenset(
    {
        QueueOutcome.DUPLICATE,
        QueueOutcome.KEY_CONFLICT,
        TransitionOutcome.DUPLICATE,
        TransitionOutcome.KEY_CONFLICT,
    }
)


def _key_text(record: SharedRunRecord) -> str:
    return f"concurrency key {record.concurrency_key} (limit {record.flow_limit}, {record.flow_strategy})"


_SUBMIT_EVENTS = {
    SharedRunStatus.CANCELLED: "cancelled",
    SharedRunStatus.QUEUED_GLOBALLY: "queued",
    SharedRunStatus.SCALE_OUT_REQUESTED: "scale_out_requested",
    SharedRunStatus.REJECTED: "rejected",
}


@dataclass(frozen=True)
class DirectAdmission:
    """What a DirectDispatch submit needs besides the queue: a control plane's admission,
    delivery to its providers and scale-out requests."""

    admission: AdmissionController
    delivery: RunDelivery
    scale_out: ScaleOutRequestStore


class SharedRuntimeController:
    def __init__(
        self,
        runs: SharedRunStore,
        queue: SharedQueue,
        journal: SharedRunJournal,
        *,
        validate: PipelineValidator,
        direct: DirectAdmission | None = None,
        check_input: InputCheck | None = None,
        on_enqueued: Callable[[], None] | None = None,
        keep_copy: Callable[[SharedRunRecord], Awaitable[None]] | None = None,
        rate_limits: TenantRateLimits | None = None,
        check_for_tenant: TenantPipelineCheck | None = None,
    ) -> None:
        """Without `direct` (a process that runs no control plane) every submit is queued first."""
        self.runs = runs
        self.queue = queue
        self.journal = journal
        self.direct = direct
        self.validate = validate
        self.check_input = check_input
        self.on_enqueued = on_enqueued
        self.keep_copy = keep_copy
        self.rate_limits = rate_limits or TenantRateLimits()
        self.check_for_tenant = check_for_tenant
        # Cancels the runs a cancel-in-progress key picked (the control plane sets it).
        self.on_key_evictions: KeyEvictions | None = None

    async def submit(
        self,
        pipeline: PipelineDefinition,
        input: dict[str, Any],
        mode: SubmitMode,
        snapshot: ExecutionContextSnapshot | None,
        *,
        provider_hint: str | None = None,
        idempotency: IdempotencyKey | None = None,
        callback_url: str | None = None,
        priority: int | None = None,
        concurrency: ConcurrencyKey | None = None,
    ) -> SubmitResult:
        """With `idempotency`, a key the tenant already used returns the run it made (or a
        conflict for another request) and submits nothing; the claim is atomic with creation.
        `priority` orders the run among its admission group's queued runs (None: the default).
        `concurrency` (else the pipeline's `config.flow.concurrency`) places the run under a
        concurrency key; such a run is always queued first (the queue holds the key's slots)."""
        if snapshot is None:
            raise MissingSnapshotError(
                "A shared run needs the caller's ExecutionContextSnapshot.",
                hint="Capture the snapshot from the authenticated principal before submitting.",
            )
        if self.check_input is not None:
            self.check_input(input)
        self.validate(pipeline)
        if self.check_for_tenant is not None:
            await self.check_for_tenant(pipeline, snapshot)
        flow = PipelineFlow.of_config(pipeline.config)
        declared = concurrency or flow.concurrency
        key = place_key(declared, snapshot.tenant_id, pipeline.name, input) if declared else None
        paced = dispatch_cells(snapshot.tenant_id, self.rate_limits)
        # The queue holds a key's slots and paces dispatches: such runs are always queued first
        # (and every run where there is no admission to dispatch it directly).
        if key is not None or paced or self.direct is None:
            mode = SubmitMode.QUEUE_FIRST
        first_status = (
            SharedRunStatus.QUEUED_GLOBALLY if mode is SubmitMode.QUEUE_FIRST else SharedRunStatus.SUBMITTED
        )
        run_trace = allocate_run_trace(pipeline.name)
        record = SharedRunRecord(
            shared_run_id=self.runs.keys.new_run_id(snapshot.tenant_id),
            status=first_status,
            submit_mode=mode,
            tenant_id=snapshot.tenant_id,
            snapshot=snapshot,
            pipeline=pipeline,
            input=input,
            trace_context=run_trace.encode() if run_trace is not None else None,
            callback_url=callback_url,
            priority=priority,
            dispatch_limits=cells_json(paced) if paced else None,
            **(key.record_fields() if key is not None else {}),
        )
        cells = submit_cells(snapshot.tenant_id, pipeline.name, self.rate_limits, flow)
        with restored_snapshot(snapshot):
            if mode is SubmitMode.QUEUE_FIRST:
                queued = await self.queue.enqueue_new(record, idempotency, cells)
                if idempotency is not None and queued.outcome in _KEY_USED:
                    return await self._replayed(idempotency, queued.outcome is QueueOutcome.DUPLICATE, queued)
                if queued.outcome is QueueOutcome.RATE_LIMITED:
                    raise submit_refused(cells, queued.detail, queued.wait_us)
                result = await self._queued_first(record, queued)
            else:
                created = await self.runs.create(record, idempotency, cells)
                if idempotency is not None and created.outcome in _KEY_USED:
                    same = created.outcome is TransitionOutcome.DUPLICATE
                    return await self._replayed(idempotency, same, created)
                if created.outcome is TransitionOutcome.RATE_LIMITED:
                    raise submit_refused(cells, created.current_status, created.wait_us)
                await self._keep_copy(record)
                result = await self._direct(record, provider_hint)
            await self._journal_submit(record, result)
        return result

    async def _queued_first(self, record: SharedRunRecord, queued: QueueTransition) -> SubmitResult:
        """The answer to a created queue-first run: queued (Pending, or Held in its concurrency
        key's line), or cancelled at once (cancel-newest); runs its key's cancel-in-progress
        picked are cancelled before it answers."""
        if queued.outcome is QueueOutcome.KEY_CANCELLED:  # ended: nothing to requeue, no durable copy
            return self._result(
                record,
                SharedRunStatus.CANCELLED,
                None,
                f"{_key_text(record)} had no free slot (cancel-newest)",
            )
        await self._expect_applied(_created(queued, record), record)
        await self._keep_copy(record)
        if queued.picked and self.on_key_evictions is not None:
            assert record.snapshot is not None
            await self.on_key_evictions(list(queued.picked), record.snapshot)
        if queued.placement == QueueItemStatus.HELD.value:
            return self._queued(record, None, f"waiting for a slot of {_key_text(record)}")
        return self._queued(record, None, "queue-first submit")

    async def _keep_copy(self, record: SharedRunRecord) -> None:
        """The durable copy of a new run's request (what requeues it if Redis loses it queued)."""
        if self.keep_copy is not None:
            await self.keep_copy(record)

    async def _replayed(
        self, idempotency: IdempotencyKey, same_request: bool, outcome: QueueTransition | RunTransition
    ) -> SubmitResult:
        """The answer to a submit whose idempotency key already made a run: that run, as it is now."""
        shared_run_id = outcome.detail if isinstance(outcome, QueueTransition) else outcome.current_status
        assert shared_run_id is not None
        if not same_request:
            raise IdempotencyConflictError(idempotency.key, shared_run_id)
        existing = await self.runs.get(shared_run_id)
        if existing is None:
            raise IdempotentRunGoneError(idempotency.key, shared_run_id)
        # The call that created it may have lost its reply before journaling it (this is the
        # client's retry): its creation is recorded now, once.
        await self.journal.record_submitted(existing, announce=False)
        return SubmitResult(
            shared_run_id=shared_run_id,
            status=existing.status,
            submit_mode=existing.submit_mode,
            admission_decision=existing.admission_decision,
            reason=f"idempotency key '{idempotency.key}' already submitted this run; nothing new submitted",
            assigned_runtime_instance_id=existing.assigned_runtime_instance_id,
            local_run_id=existing.local_run_id,
            scale_out_request_id=existing.scale_out_request_id,
            deduplicated=True,
        )

    async def _journal_submit(self, record: SharedRunRecord, result: SubmitResult) -> None:
        journal = self.journal
        await journal.record_submitted(record)
        if result.status is not SharedRunStatus.DISPATCHED:  # delivery journals its own dispatch
            await journal.record(
                record,
                _SUBMIT_EVENTS[result.status],
                reason=result.reason,
                **(
                    {"scale_out_request_id": result.scale_out_request_id}
                    if result.scale_out_request_id
                    else {}
                ),
            )

    async def _direct(self, record: SharedRunRecord, provider_hint: str | None) -> SubmitResult:
        """Admit a created (Submitted) run now: dispatch, queue, request scale-out or reject."""
        assert record.snapshot is not None and self.direct is not None
        decision = await self.direct.admission.admit(record.snapshot)
        if decision.kind is AdmissionKind.ASSIGN_TO_INSTANCE:
            return await self._assign(record, decision)
        if decision.kind is AdmissionKind.QUEUE_GLOBALLY:
            return await self._queue_existing(record, decision, decision.reason)
        if decision.kind is AdmissionKind.REQUEST_SCALE_OUT:
            return await self._request_scale_out(record, decision, provider_hint)
        await self.runs.transition(
            record,
            (SharedRunStatus.SUBMITTED,),
            SharedRunStatus.REJECTED,
            {"failure_reason": decision.reason, **self._admission_fields(decision)},
        )
        return self._result(record, SharedRunStatus.REJECTED, decision, decision.reason)

    async def _assign(self, record: SharedRunRecord, decision: AdmissionDecision) -> SubmitResult:
        assert self.direct is not None
        delivery = await self.direct.delivery.deliver(
            record, decision, lambda fields: self.queue.mark_dispatched(record.shared_run_id, "", fields)
        )
        if delivery.outcome is DispatchOutcome.DISPATCHED:
            return self._result(
                record,
                SharedRunStatus.DISPATCHED,
                decision,
                "dispatched at submit",
                assigned_runtime_instance_id=delivery.runtime_instance_id,
                local_run_id=delivery.local_run_id,
            )
        return await self._queue_existing(record, decision, delivery.reason)

    async def _queue_existing(
        self, record: SharedRunRecord, decision: AdmissionDecision, reason: str
    ) -> SubmitResult:
        await self._expect_applied(
            await self.queue.enqueue_existing(record, (SharedRunStatus.SUBMITTED,)), record
        )
        return self._queued(record, decision, reason)

    async def _request_scale_out(
        self, record: SharedRunRecord, decision: AdmissionDecision, provider_hint: str | None
    ) -> SubmitResult:
        assert record.snapshot is not None and self.direct is not None
        request_id = new_scale_out_request_id()
        await self.runs.transition(
            record,
            (SharedRunStatus.SUBMITTED,),
            SharedRunStatus.SCALE_OUT_REQUESTED,
            {"scale_out_request_id": request_id, **self._admission_fields(decision)},
        )
        await self.direct.scale_out.create(
            request_id, record.shared_run_id, decision.tenant_settings, record.snapshot, provider_hint
        )
        return self._result(
            record,
            SharedRunStatus.SCALE_OUT_REQUESTED,
            decision,
            decision.reason,
            scale_out_request_id=request_id,
        )

    async def _expect_applied(self, transition: QueueTransition, record: SharedRunRecord) -> None:
        if not transition.applied:
            raise ConflictError(
                f"Shared run '{record.shared_run_id}' could not be queued ({transition.detail}).",
                hint="Read its status with run.status.",
            )
        if self.on_enqueued is not None:
            self.on_enqueued()

    def _queued(
        self, record: SharedRunRecord, decision: AdmissionDecision | None, reason: str
    ) -> SubmitResult:
        return self._result(record, SharedRunStatus.QUEUED_GLOBALLY, decision, reason)

    @staticmethod
    def _admission_fields(decision: AdmissionDecision) -> dict[str, str]:
        return {"admission_decision": decision.kind.value, "admission_reason": decision.reason}

    @staticmethod
    def _result(
        record: SharedRunRecord,
        status: SharedRunStatus,
        decision: AdmissionDecision | None,
        reason: str,
        **extra: str | None,
    ) -> SubmitResult:
        return SubmitResult(
            shared_run_id=record.shared_run_id,
            status=status,
            submit_mode=record.submit_mode,
            admission_decision=decision.kind.value if decision else None,
            reason=reason,
            **extra,
        )
