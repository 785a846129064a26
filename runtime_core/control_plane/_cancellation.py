"""RunCanceller: `cancel` of a shared, local or execution id, routed to where the run is now.

Owns choosing the cancellation path: a shared run still queued is cancelled in the shared
queue (no LocalRunId or ExecutionId is ever created); a dispatched run is cancelled through
its owning instance's provider (which bridges to execution control when it is running), or
through execution control directly when that instance is out of this process's reach (the
in-process instance of another control plane); a bare execution through the execution
canceller. Every lookup is tenant-checked first. A shared run being dispatched right now is
waited for (its claim settles in moments) rather than refused.
Must not dispatch or execute.
"""

from __future__ import annotations

import asyncio
import time

from runtime_core.control_plane._parts import ControlPlaneParts
from runtime_core.control_plane._run_access import LocatedRun, RunLocator
from runtime_core.control_plane._views import CancelResult
from runtime_core.errors import ConflictError, RunBusyError
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.instances import InstanceEntry, LocalRunStatus, LocalRunView, RunIndexRecord
from runtime_core.observability import end_unexecuted_run_span
from runtime_core.providers import CancelRunRequest, ProviderError
from runtime_core.queueing import QueueOutcome, SharedRunStatus

_CANCELLABLE_SHARED = (
    SharedRunStatus.SUBMITTED,
    SharedRunStatus.QUEUED_GLOBALLY,
    SharedRunStatus.SCALE_OUT_REQUESTED,
)
DISPATCH_SETTLE_WAIT_S = 5.0
_SETTLE_POLL_S = (0.005, 0.2)  # first and longest pause between looks at a claimed shared run


class RunCanceller:
    def __init__(self, parts: ControlPlaneParts, locator: RunLocator) -> None:
        self.parts = parts
        self.locator = locator

    async def cancel(
        self, any_id: str, caller: ExecutionContextSnapshot, *, reason: str = ""
    ) -> CancelResult:
        located = await self.locator.locate(any_id, caller)
        if located.archived is not None:
            raise ConflictError(
                f"Run '{any_id}' is already {located.archived.status}; there is nothing left to cancel.",
                hint="Read run.status for its outcome; submit again to run it anew.",
            )
        reason = reason or f"cancelled by {caller.user_id}"
        with restored_snapshot(located.snapshot):
            if located.shared is not None and located.shared.status in _CANCELLABLE_SHARED:
                result = await self._cancel_shared_when_settled(any_id, located, reason, caller)
                if result is not None:
                    return result
                located = await self.locator.locate(any_id, caller)
            if located.local is not None:
                if located.local.status.is_terminal:
                    raise ConflictError(
                        f"Run '{any_id}' is already {located.local.status.value}; "
                        "there is nothing left to cancel.",
                        hint="Read run.status for its outcome; submit again to run it anew.",
                    )
                return await self._cancel_local(any_id, located, located.local, reason, caller)
            if located.shared is None and located.execution_id:
                await self.parts.canceller.cancel(located.execution_id, located.snapshot, reason=reason)
                return CancelResult(
                    requested_id=any_id,
                    execution_id=located.execution_id,
                    message="execution cancellation requested",
                )
        status = located.shared.status.value if located.shared else "unknown"
        raise ConflictError(f"Run '{any_id}' is {status}; there is nothing left to cancel.")

    async def _cancel_shared_when_settled(
        self, any_id: str, located: LocatedRun, reason: str, caller: ExecutionContextSnapshot
    ) -> CancelResult | None:
        """`_cancel_shared`, waiting out a dispatch in flight: the claim ends dispatched (then
        None: the local run is cancelled instead) or back in the queue (cancelled there)."""
        deadline = time.monotonic() + DISPATCH_SETTLE_WAIT_S
        pause, longest = _SETTLE_POLL_S
        while True:
            try:
                return await self._cancel_shared(any_id, located, reason, caller)
            except RunBusyError:
                if time.monotonic() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest)

    async def _cancel_shared(
        self, any_id: str, located: LocatedRun, reason: str, caller: ExecutionContextSnapshot
    ) -> CancelResult | None:
        assert located.shared is not None
        transition = await self.parts.queue.cancel(
            located.shared.shared_run_id, reason=reason, requested_by=caller.user_id
        )
        if transition.outcome is QueueOutcome.BUSY:
            raise RunBusyError(
                f"Shared run '{located.shared.shared_run_id}' is being dispatched right now.",
                hint="Retry the cancellation in a moment.",
            )
        if not transition.applied:
            return None  # dispatched meanwhile: cancel the local run instead
        await self.parts.controller.journal.record(
            located.shared, "cancelled", reason=reason, requested_by=caller.user_id
        )
        return CancelResult(
            requested_id=any_id,
            shared_run_id=located.shared.shared_run_id,
            shared_status=SharedRunStatus.CANCELLED.value,
            message="shared run cancelled before dispatch; no LocalRunId or ExecutionId was created",
        )

    async def _cancel_local(
        self,
        any_id: str,
        located: LocatedRun,
        local: RunIndexRecord,
        reason: str,
        caller: ExecutionContextSnapshot,
    ) -> CancelResult:
        entry = next(
            (
                e
                for e in await self.parts.registry.entries()
                if e.runtime_instance_id == local.runtime_instance_id
            ),
            None,
        )
        if entry is None:
            raise ConflictError(
                f"Runtime instance '{local.runtime_instance_id}' of run '{any_id}' is gone.",
                hint="Its execution is recovered by the recovery reconciler; cancel it by ExecutionId.",
            )
        execution_id, status, message = await self._cancel_on_instance(entry, located, local, reason, caller)
        if status is LocalRunStatus.CANCELLED and execution_id is None and located.shared is not None:
            end_unexecuted_run_span(  # cancelled in its instance's queue: it never executed
                located.shared.trace_context, shared_run_id=located.shared.shared_run_id, status=status.value
            )
        return CancelResult(
            requested_id=any_id,
            shared_run_id=local.shared_run_id,
            local_run_id=local.local_run_id,
            execution_id=execution_id,
            shared_status=located.shared.status.value if located.shared else None,
            local_status=status.value,
            message=message,
        )

    async def _cancel_on_instance(
        self,
        entry: InstanceEntry,
        located: LocatedRun,
        local: RunIndexRecord,
        reason: str,
        caller: ExecutionContextSnapshot,
    ) -> tuple[str | None, LocalRunStatus, str]:
        """Through the owning instance's provider: (execution id, local status, message).

        An instance out of reach from here (an in-process instance of another control-plane
        process) has its execution cancelled through execution control in Redis instead; the
        owning instance observes that and closes the local run.
        """
        try:
            view = await self.parts.providers.for_instance(entry.descriptor).cancel_run(
                CancelRunRequest(
                    runtime_instance_id=local.runtime_instance_id,
                    local_run_id=local.local_run_id,
                    reason=reason,
                    requested_by=caller.user_id,
                )
            )
        except ProviderError:
            if local.execution_id is None:
                raise
            await self.parts.canceller.cancel(local.execution_id, located.snapshot, reason=reason)
            return local.execution_id, local.status, "execution cancellation requested"
        return view.execution_id, view.status, _local_cancel_message(view)


def _local_cancel_message(view: LocalRunView) -> str:
    if view.status is LocalRunStatus.RUNNING:
        return "execution cancellation requested"
    if view.status is LocalRunStatus.CANCELLED and view.execution_id is None:
        return "queued run cancelled; no ExecutionId was created"
    return f"run already {view.status.value}; nothing left to cancel"
