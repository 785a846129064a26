"""RunDrainer: a manual drain of the shared queue, answered for the caller's tenant only.

Owns running one pump pass under this control plane's drain identity (each run's own
snapshot drives its admission) and shaping what the caller learns: progress, counts, the runs
and the pending count of its own tenant, never another tenant's (whose runs never record the
caller's user either). Must not dispatch except through the pump.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runtime_core.control_plane._parts import ControlPlaneParts
from runtime_core.control_plane._views import DrainedRun, DrainResult
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.queueing import DispatchOutcome, DispatchResult, PumpIdentity, PumpRequest

DrainProgress = Callable[[int, int, str], Awaitable[None]]
MANUAL_DRAIN_WORKER_ID = "drain"


def _progress_message(result: DispatchResult) -> str:
    return f"{result.outcome.value} {result.shared_run_id} -> {result.assigned_runtime_instance_id or '-'}"


def _drained(result: DispatchResult) -> DrainedRun:
    assert result.shared_run_id is not None
    return DrainedRun(
        shared_run_id=result.shared_run_id,
        outcome=result.outcome.value,
        assigned_runtime_instance_id=result.assigned_runtime_instance_id,
        local_run_id=result.local_run_id,
        reason=result.reason,
    )


class RunDrainer:
    def __init__(self, parts: ControlPlaneParts, control_plane_id: str) -> None:
        self.parts = parts
        self.control_plane_id = control_plane_id

    async def drain(
        self,
        max_count: int,
        caller: ExecutionContextSnapshot,
        progress: DrainProgress | None = None,
        *,
        stop_on_failure: bool = False,
    ) -> DrainResult:
        identity = PumpIdentity(
            pump_runtime_instance_id=self.control_plane_id,
            pump_worker_id=MANUAL_DRAIN_WORKER_ID,
            incarnation=self.parts.incarnation,
            requested_by_tenant_id=caller.tenant_id,
            requested_by_user_id=caller.user_id,
        )
        reported = 0

        async def report(_: int, result: DispatchResult) -> None:
            nonlocal reported
            if progress is not None and result.tenant_id == caller.tenant_id:
                reported += 1
                await progress(reported, max_count, _progress_message(result))

        result = await self.parts.pump.pump(
            PumpRequest(max_dispatch_count=max_count, stop_on_failure=stop_on_failure, pump=identity),
            progress=report,
        )
        own = [a for a in result.attempts if a.tenant_id == caller.tenant_id and a.shared_run_id]
        return DrainResult(
            attempted=len(own),
            dispatched=sum(a.success for a in own),
            failed=sum(a.outcome is DispatchOutcome.FAILED for a in own),
            no_capacity=sum(a.outcome is DispatchOutcome.NO_CAPACITY for a in own),
            stop_reason=result.stop_reason.value,
            pending_after=await self.parts.queue.pending_count_of_tenant(caller.tenant_id),
            runs=[_drained(a) for a in own],
        )
