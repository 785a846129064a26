"""`cancel` of a shared run a pump is dispatching at that moment: the cancel waits for the
claim to settle and cancels where the run lands; a claim that does not settle in time answers
a typed busy conflict and changes nothing (a bulk cancel reports it as `busy`, not finished)."""

from __future__ import annotations

import asyncio

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.control_plane import _cancellation as cancellation
from runtime_core.errors import RunBusyError
from runtime_core.hot_state import HotState
from runtime_core.queueing import PumpIdentity, QueueOutcome, QueueTransition, SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, ONE_STEP, control_plane, start_instance

PUMP = PumpIdentity(pump_runtime_instance_id="rt_testhost:control-plane", pump_worker_id="test-pump")


def _count_busy_answers(plane: ControlPlane) -> list[QueueTransition]:
    """Every BUSY answer of the shared queue's cancel, as it happens (a spy on the real queue)."""
    busy: list[QueueTransition] = []
    queue = plane.parts.queue
    real_cancel = queue.cancel

    async def cancel(shared_run_id: str, *, reason: str, requested_by: str) -> QueueTransition:
        transition = await real_cancel(shared_run_id, reason=reason, requested_by=requested_by)
        if transition.outcome is QueueOutcome.BUSY:
            busy.append(transition)
        return transition

    queue.cancel = cancel  # type: ignore[method-assign]
    return busy


async def test_a_cancel_during_a_dispatch_waits_for_the_claim_and_cancels_the_run_in_the_queue(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        claim = await plane.parts.queue.claim_next(PUMP)
        assert claim is not None
        busy = _count_busy_answers(plane)
        cancelling = asyncio.create_task(plane.cancel(submitted.shared_run_id, DEFAULT_TENANT))

        async def refused_while_claimed() -> bool:
            return len(busy) >= 2

        await wait_until(refused_while_claimed, timeout=5, interval=0.005)
        assert not cancelling.done()
        await plane.parts.queue.requeue(claim, "delivery failed")  # the dispatch settles: back in line
        cancelled = await cancelling

        assert cancelled.shared_status == SharedRunStatus.CANCELLED.value
        status = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        assert status.shared_status == "Cancelled" and status.local_run_id is None
        assert (await plane.drain(10, DEFAULT_TENANT)).attempted == 0
        assert instance.local_runs() == []
    finally:
        await plane.stop()


async def test_a_claim_that_does_not_settle_in_time_answers_busy_and_changes_nothing(
    hot_state: HotState, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cancellation, "DISPATCH_SETTLE_WAIT_S", 0.1)
    plane = control_plane(hot_state)
    await start_instance(plane)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        claim = await plane.parts.queue.claim_next(PUMP)
        assert claim is not None
        with pytest.raises(RunBusyError, match="being dispatched right now") as refused:
            await plane.cancel(submitted.shared_run_id, DEFAULT_TENANT)
        assert refused.value.code == "conflict"

        record = await plane.parts.runs.get(submitted.shared_run_id)
        assert record is not None and record.status is SharedRunStatus.QUEUED_GLOBALLY
        await plane.parts.queue.requeue(claim, "delivery failed")
        drained = await plane.drain(10, DEFAULT_TENANT)
        assert drained.dispatched == 1  # the refused cancel left the run to run

        async def completed() -> bool:
            view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
            return view.local_status == "Completed"

        await wait_until(completed, timeout=10)
    finally:
        await plane.stop()
