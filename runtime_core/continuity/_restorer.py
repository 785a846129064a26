"""HotStateContinuity: restore a live local run's lost hot state from what survives it.

Owns `restore_shared_run` (the shared run record, recreated Dispatched to the local run that
holds it, from the request the instance kept in memory) and `restore_execution` (the
execution, restored the way replay restores it: from its terminal snapshot, or from its
header and archived steps, steps never archived starting again; the calls its unfinished
steps had begun are recorded again, so they are found uncertain), each recorded as forensics
(`restored`, or `failed_lost` when no durable copy exists). Must not run anything.
"""

from __future__ import annotations

import logging

from runtime_core.audit import ForensicsRecorder, ReplayService
from runtime_core.continuity._evidence import FAILED_LOST, RESTORED, LostRunEvidence
from runtime_core.continuity._operations import put_back_operations
from runtime_core.errors import NotFoundError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import LocalRunRequest, RunIndexRecord
from runtime_core.queueing import (
    SharedRunRecord,
    SharedRunStatus,
    SharedRunStore,
    SubmitMode,
    TransitionOutcome,
)

log = logging.getLogger("runtime_core.continuity")

SUBMIT_MODE_KEY = "submit.mode"


class HotStateContinuity:
    def __init__(
        self, runs: SharedRunStore, replay: ReplayService, forensics: ForensicsRecorder | None = None
    ) -> None:
        self.runs = runs
        self.replay = replay
        self.evidence = LostRunEvidence(forensics)

    async def restore_shared_run(self, request: LocalRunRequest, record: RunIndexRecord) -> None:
        """Recreate the shared run (when it is missing) as Dispatched to `record`'s local run."""
        assert request.shared_run_id is not None and request.snapshot is not None
        shared = SharedRunRecord(
            shared_run_id=request.shared_run_id,
            status=SharedRunStatus.DISPATCHED,
            submit_mode=SubmitMode(request.attributes.get(SUBMIT_MODE_KEY, SubmitMode.QUEUE_FIRST.value)),
            tenant_id=request.snapshot.tenant_id,
            snapshot=request.snapshot,
            pipeline=request.pipeline,
            input=request.input,
        )
        created = await self.runs.create(shared)
        if created.outcome is not TransitionOutcome.APPLIED:
            return  # it survived, or another process restored it first
        await self.runs.transition(
            shared,
            (SharedRunStatus.DISPATCHED,),
            SharedRunStatus.DISPATCHED,
            {
                "local_run_id": record.local_run_id,
                "assigned_runtime_instance_id": record.runtime_instance_id,
                "last_requeue_reason": "restored by its runtime instance after Redis lost its dataset",
            },
        )
        log.warning(
            "shared_run.restored_after_hot_state_loss shared_run_id=%s local_run_id=%s",
            shared.shared_run_id,
            record.local_run_id,
            extra={"shared_run_id": shared.shared_run_id, "tenant_id": shared.tenant_id},
        )

    async def restore_execution(
        self, execution_id: str, snapshot: ExecutionContextSnapshot, record: RunIndexRecord, epoch: str
    ) -> bool:
        """Restore a lost execution from its durable copy; False when none exists. `record` is the
        local run that holds it, `epoch` the new dataset's (both go into the evidence)."""
        where = {
            "epoch": epoch,
            "runtime_instance_id": record.runtime_instance_id,
            "execution_id": execution_id,
            "shared_run_id": record.shared_run_id,
            "local_run_id": record.local_run_id,
        }
        try:
            result = await self.replay.replay(execution_id, snapshot)
        except NotFoundError:
            await self.evidence.record(snapshot, FAILED_LOST, **where, reason="no durable copy")
            return False
        in_doubt = await put_back_operations(
            self.replay.dag_store, self.replay.store, snapshot.tenant_id, execution_id
        )
        await self.evidence.record(
            snapshot,
            RESTORED,
            **where,
            source=result.source.value,
            reason=f"restored from {result.source.value}",
            uncertain_operations=in_doubt,
        )
        log.warning(
            "execution.restored_after_hot_state_loss execution_id=%s source=%s status=%s",
            execution_id,
            result.source.value,
            result.status,
            extra={"execution_id": execution_id, "tenant_id": snapshot.tenant_id},
        )
        return True
