"""ExecutionRecoveryReconciler: take over the work of dead runtime instance incarnations.

Owns enumerating the work of dead incarnations (an Unsafe instance: all its assigned local
runs; an instance whose id a new incarnation took over after a crash, a SIGTERM or a
restart: the local runs its predecessors accepted) from the run-execution index and the
shared run store (never from the dead local queue), claiming every item exactly once,
sealing its index record (so the dead incarnation, if it is a zombie, can neither start nor
finish it), and the per-item decision under the item's restored snapshot. An
InFlightExecution (an ExecutionId exists, not terminal) gets the steps the dead incarnation
left Running released and stops being the dead run's (retry budget untouched; the dead
run's workers are refused further claims), and its shared run requeued carrying
`resume_execution_id`, so the same ExecutionId continues; a LocalQueued run is requeued
under its SharedRunId for a new LocalRunId. An ExecutionId recorded but never created (the
incarnation died in between) is fenced and its run requeued afresh, unless a durable
terminal snapshot says it already finished. Admission decides between the shared queue
(tenant-visible capacity exists or is busy) and a scale-out request. Writes forensics and
ledger evidence per item, and marks an Unsafe instance Recovered (or forgets superseded
predecessors after a grace) once nothing is left. Must not dispatch (the pump does, under
dispatch-time admission) nor create capacity (the scale-out watcher does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from runtime_core.dag import DagStore, ExecutionStatus, operations_in_doubt
from runtime_core.errors import StoreUnavailableError
from runtime_core.events import RunEventPublisher
from runtime_core.identity import restored_snapshot
from runtime_core.instances import (
    AdmissionController,
    AdmissionDecision,
    AdmissionKind,
    InstanceRegistry,
    LocalRunStatus,
    RunExecutionIndex,
    RunIndexRecord,
    announce_end,
)
from runtime_core.queueing import (
    QueueItemStatus,
    ScaleOutRequestStore,
    SharedQueue,
    SharedRunRecord,
    SharedRunStatus,
    SharedRunStore,
    new_scale_out_request_id,
)
from runtime_core.recovery._archive import ExecutionArchive
from runtime_core.recovery._claims import ItemClaimOutcome, RecoveryClaims
from runtime_core.recovery._dag_release import release_execution_claims
from runtime_core.recovery._evidence import RecoveryEvidence
from runtime_core.recovery._health_store import DeadIncarnations, InstanceHealthStore
from runtime_core.recovery._models import (
    RecoveredItem,
    RecoveryAction,
    RecoveryCause,
    RecoveryKind,
    RecoverySettings,
)
from runtime_core.recovery._requeue import RunRecovery, RunRecoveryOutcome, SharedRunRecovery

log = logging.getLogger("runtime_core.recovery")


@dataclass(frozen=True)
class RecoveryDependencies:
    """What recovery reads and writes; no engine timing (claims carry their own claim time)."""

    registry: InstanceRegistry
    index: RunExecutionIndex
    admission: AdmissionController
    runs: SharedRunStore
    queue: SharedQueue
    scale_out: ScaleOutRequestStore
    dag_store: DagStore
    evidence: RecoveryEvidence
    archive: ExecutionArchive | None = None
    events: RunEventPublisher | None = None  # announces the ends of runs it closes


@dataclass(frozen=True)
class _Outcome:
    """`done` closes the item's claim for good; otherwise a later pass retries it."""

    done: bool
    note: str = ""
    item: RecoveredItem | None = None


class ExecutionRecoveryReconciler:
    def __init__(
        self,
        deps: RecoveryDependencies,
        settings: RecoverySettings,
        *,
        on_requeued: Callable[[], None] | None = None,
    ) -> None:
        self.deps = deps
        self.settings = settings
        self.on_requeued = on_requeued
        self.health = InstanceHealthStore(deps.registry)
        self.claims = RecoveryClaims(
            deps.registry, reconciler_id=settings.reconciler_id, lease_ms=settings.claim_lease_ms
        )
        self.requeue = SharedRunRecovery(deps.registry.hot_state)

    async def reconcile_once(self) -> list[RecoveredItem]:
        """Recover every dead incarnation's assigned work; the items this pass recovered."""
        recovered = []
        for dead in await self.health.dead_incarnations():
            recovered += await self.recover(dead)
        return recovered

    async def recover(self, dead: DeadIncarnations) -> list[RecoveredItem]:
        recovered = []
        for record in await self._dead_records(dead):
            item = await self._recover_claimed(dead, record)
            if item is not None:
                recovered.append(item)
        if recovered:
            now_ms = await self.deps.registry.hot_state.server_time_ms()
            await self.deps.evidence.report_pass(dead.runtime_instance_id, recovered, now_ms)
        if not await self._dead_records(dead):
            await self._close(dead)
        return recovered

    async def _dead_records(self, dead: DeadIncarnations) -> list[RunIndexRecord]:
        records = await self.deps.index.assigned_to(dead.runtime_instance_id)
        return [record for record in records if dead.is_dead(record.incarnation)]

    async def _close(self, dead: DeadIncarnations) -> None:
        rid, retention = dead.runtime_instance_id, self.settings.recovered_retention_ms
        if dead.live_incarnation is None:
            await self.health.mark_recovered(rid, dead.registered_incarnation, retention)
            return
        grace = self.settings.predecessor_grace_ms
        settled = [name for name, cutoff in dead.predecessors.items() if dead.now_ms - cutoff >= grace]
        await self.health.close_predecessors(rid, dead.live_incarnation, settled)

    async def _recover_claimed(self, dead: DeadIncarnations, record: RunIndexRecord) -> RecoveredItem | None:
        rid, local_run_id = dead.runtime_instance_id, record.local_run_id
        if await self.claims.claim(rid, local_run_id, record.incarnation) is not ItemClaimOutcome.CLAIMED:
            return None
        try:
            with restored_snapshot(record.snapshot):
                outcome = await self._recover(dead, record)
        except StoreUnavailableError:
            raise  # the loop backs off; the item's claim lease lapses and a later pass retries it
        except Exception:  # a broken record: a later pass retries the item
            log.exception(
                "recovery.item_failed", extra={"runtime_instance_id": rid, "local_run_id": local_run_id}
            )
            await self.claims.retry_later(rid, local_run_id)
            return None
        if outcome.done:
            await self.claims.complete(rid, local_run_id, outcome.note)
        else:
            await self.claims.retry_later(rid, local_run_id)
        return outcome.item

    async def _recover(self, dead: DeadIncarnations, record: RunIndexRecord) -> _Outcome:
        if record.status.is_terminal:  # its instance closed it and died before announcing the end
            await announce_end(self.deps.index, self.deps.events, record)
            return _Outcome(done=True, note="end announced")
        sealed = await self.deps.index.seal(record, self.settings.reconciler_id)
        if sealed is None:
            return _Outcome(done=False)  # its incarnation wrote it meanwhile: judge it again
        record = sealed
        shared = await self.deps.runs.get(record.shared_run_id) if record.shared_run_id else None
        kind = RecoveryKind.IN_FLIGHT_EXECUTION if record.execution_id else RecoveryKind.LOCAL_QUEUED
        if record.execution_id:
            status = await self._execution_status(record.execution_id)
            if status is None:
                return await self._never_created(dead, record, shared)
            if ExecutionStatus(status).is_terminal:
                await self._close_record(record, LocalRunStatus(status), None, announce=True)
                return _Outcome(done=True, note=f"execution already {status}")
        if shared is None:
            return await self._abandon(dead, record, kind, "no shared run to requeue it through")
        return await self._requeue(dead, record, shared, kind)

    async def _execution_status(self, execution_id: str) -> str | None:
        """The DAG's status; None when it does not exist (its ExecutionId is then fenced)."""
        status = await self.deps.dag_store.execution_status(execution_id)
        if status is not None:
            return status
        return await self.deps.dag_store.fence_execution(
            execution_id,
            f"recovered by {self.settings.reconciler_id} before its DAG existed",
            retention_ms=self.settings.fence_retention_ms,
        )

    async def _never_created(
        self, dead: DeadIncarnations, record: RunIndexRecord, shared: SharedRunRecord | None
    ) -> _Outcome:
        """The local run's ExecutionId has no DAG (fenced now): finished and retired already, lost
        with the hot state of a resumed run, or never created (dispatch it afresh)."""
        assert record.execution_id is not None
        status = None
        if self.deps.archive is not None:
            status = await self.deps.archive.terminal_status(record.execution_id, record.tenant_id)
        if status is not None:
            await self._close_record(record, LocalRunStatus(status), None, announce=True)
            return _Outcome(done=True, note=f"execution already {status} (archived)")
        kind = RecoveryKind.IN_FLIGHT_EXECUTION
        if shared is None or shared.resume_execution_id == record.execution_id:
            return await self._abandon(dead, record, kind, "the execution's hot state is gone")
        return await self._requeue(dead, record, shared, RecoveryKind.LOCAL_QUEUED)

    async def _requeue(
        self, dead: DeadIncarnations, record: RunIndexRecord, shared: SharedRunRecord, kind: RecoveryKind
    ) -> _Outcome:
        rid = dead.runtime_instance_id
        resume = record.execution_id if kind is RecoveryKind.IN_FLIGHT_EXECUTION else None
        decision = await self.deps.admission.admit(record.snapshot)
        request_id = new_scale_out_request_id() if decision.kind is AdmissionKind.REQUEST_SCALE_OUT else None
        released: list[str] = []
        uncertain: list[dict[str, str]] = []
        if resume:
            released = await release_execution_claims(
                self.deps.dag_store,
                resume,
                claimed_before_ms=dead.cutoff_for(record.incarnation),
                dead_local_run_id=record.local_run_id,
            )
            uncertain = await operations_in_doubt(self.deps.dag_store, resume, released)
        reason = _death(dead, record)
        result = await self.requeue.recover(
            shared.shared_run_id,
            runtime_instance_id=rid,
            local_run_id=record.local_run_id,
            target=SharedRunStatus.SCALE_OUT_REQUESTED if request_id else SharedRunStatus.QUEUED_GLOBALLY,
            resume_execution_id=resume,
            fields=self._run_fields(reason, decision, request_id),
        )
        if result.outcome is not RunRecoveryOutcome.RECOVERED:
            return await self._not_recovered(record, shared, result, reason)
        if request_id:
            await self.deps.scale_out.create(
                request_id,
                shared.shared_run_id,
                decision.tenant_settings,
                record.snapshot,
                provider_hint=dead.provider_name,
            )
        action = self._action(kind, request_id)
        await self._close_record(record, LocalRunStatus.FAILED, f"{reason}; {action.value}")
        item = RecoveredItem(
            runtime_instance_id=rid,
            incarnation=record.incarnation,
            tenant_id=record.tenant_id,
            kind=kind,
            action=action,
            local_run_id=record.local_run_id,
            shared_run_id=shared.shared_run_id,
            execution_id=resume,
            released_steps=released,
            admission_decision=decision.kind.value,
            scale_out_request_id=request_id,
            reason=f"{reason}; admission: {decision.reason}",
            cause=_cause(dead),
            dead_since_ms=dead.cutoff_for(record.incarnation),
            uncertain_operations=uncertain,
        )
        await self.deps.evidence.record(item, record.snapshot)
        if self.on_requeued is not None and request_id is None:
            self.on_requeued()
        return _Outcome(done=True, note=action.value, item=item)

    @staticmethod
    def _run_fields(reason: str, decision: AdmissionDecision, request_id: str | None) -> dict[str, str]:
        fields = {
            "last_requeue_reason": reason,
            "admission_decision": decision.kind.value,
            "admission_reason": decision.reason,
        }
        if request_id:
            fields["scale_out_request_id"] = request_id
        return fields

    @staticmethod
    def _action(kind: RecoveryKind, request_id: str | None) -> RecoveryAction:
        if request_id:
            return RecoveryAction.SCALE_OUT_REQUESTED
        if kind is RecoveryKind.IN_FLIGHT_EXECUTION:
            return RecoveryAction.REQUEUED_FOR_RESUME
        return RecoveryAction.REQUEUED_FOR_REDISPATCH

    async def _not_recovered(
        self, record: RunIndexRecord, shared: SharedRunRecord, result: RunRecovery, reason: str
    ) -> _Outcome:
        """The shared run is not (or no longer) Dispatched to this local run."""
        if result.outcome is RunRecoveryOutcome.ALREADY_RECOVERED:
            await self._close_record(record, LocalRunStatus.FAILED, f"{reason}; already recovered")
            return _Outcome(done=True, note="already recovered")
        if await self._dispatch_in_progress(shared.shared_run_id, result.current_status):
            return _Outcome(done=False)
        status = result.current_status.value if result.current_status else "missing"
        await self._close_record(
            record, LocalRunStatus.FAILED, f"{reason}; its shared run is {status} elsewhere"
        )
        return _Outcome(done=True, note="superseded")

    async def _dispatch_in_progress(self, shared_run_id: str, status: SharedRunStatus | None) -> bool:
        """A dispatch that may still be marked onto this local run: decide on a later pass."""
        if status is SharedRunStatus.SUBMITTED:
            return True
        if status is not SharedRunStatus.QUEUED_GLOBALLY:
            return False
        item = await self.deps.queue.item(shared_run_id)
        return item is not None and item.status is QueueItemStatus.CLAIMED

    async def _abandon(
        self, dead: DeadIncarnations, record: RunIndexRecord, kind: RecoveryKind, why: str
    ) -> _Outcome:
        await self._close_record(record, LocalRunStatus.FAILED, f"{_death(dead, record)}; {why}")
        item = RecoveredItem(
            runtime_instance_id=dead.runtime_instance_id,
            incarnation=record.incarnation,
            tenant_id=record.tenant_id,
            kind=kind,
            action=RecoveryAction.ABANDONED,
            local_run_id=record.local_run_id,
            shared_run_id=record.shared_run_id,
            execution_id=record.execution_id,
            reason=why,
            cause=_cause(dead),
            dead_since_ms=dead.cutoff_for(record.incarnation),
        )
        await self.deps.evidence.record(item, record.snapshot)
        return _Outcome(done=True, note=RecoveryAction.ABANDONED.value, item=item)

    async def _close_record(
        self, record: RunIndexRecord, status: LocalRunStatus, reason: str | None, *, announce: bool = False
    ) -> None:
        """The dead incarnation's local run ends (its index record leaves the assigned set);
        `announce`: its execution ended, so is the run: its end event is published first."""
        closed = await self.deps.index.update(
            record,
            announced=not announce,
            status=status,
            failure_reason=reason,
            completed_at_ms=await self.deps.registry.hot_state.server_time_ms(),
        )
        if announce:
            await announce_end(self.deps.index, self.deps.events, closed)


def _cause(dead: DeadIncarnations) -> RecoveryCause:
    return RecoveryCause.INSTANCE_LOST if dead.live_incarnation is None else RecoveryCause.PROCESS_RESTARTED


def _death(dead: DeadIncarnations, record: RunIndexRecord) -> str:
    """Why the local run's incarnation is dead, for requeue reasons and closed records."""
    rid = dead.runtime_instance_id
    if dead.live_incarnation is None:
        return f"runtime instance '{rid}' became unsafe"
    return (
        f"runtime instance '{rid}' incarnation '{record.incarnation}' was superseded by "
        f"'{dead.live_incarnation}' (restarted)"
    )
