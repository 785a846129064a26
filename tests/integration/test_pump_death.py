"""Issue 13.3: the pump dies mid-dispatch, after the instance accepted the run but before the
run was recorded Dispatched. Its claim lapses (or the control plane's next life expires it)
and the next pump finds the accepted attempt, records it and never dispatches the run again;
an attempt the dead pump never delivered is abandoned, so its late arrival is refused.

A pump "dies" here the way a killed process does mid-call: its dispatch task is cancelled
while the provider call is outstanding (the instance already has the run), so neither the
reply nor the mark ever happens.
"""

from __future__ import annotations

import asyncio

import pytest

from runtime_core.control_plane import ControlPlane, run_is_done
from runtime_core.errors import ConflictError
from runtime_core.hot_state import HotState
from runtime_core.instances import LocalRunStatus, RuntimeInstance
from runtime_core.providers import DispatchRequest, DispatchResponse, LocalRuntimeProvider
from runtime_core.queueing import DispatchOutcome, DispatchResult, PumpIdentity, SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, ONE_STEP, control_plane, start_instance

DEAD_PUMP = PumpIdentity(
    pump_runtime_instance_id="control-plane:testhost", pump_worker_id="w", incarnation="inc_dead"
)
NEXT_PUMP = PumpIdentity(
    pump_runtime_instance_id="control-plane:testhost", pump_worker_id="w", incarnation="inc_next"
)


pytestmark = pytest.mark.redis_kinds("single", "cluster")


class DyingPumpProvider(LocalRuntimeProvider):
    """Hands each dispatch to the instance (or, with `deliver=False`, keeps it in transit), then
    never answers: the pump waiting on it is killed there."""

    def __init__(self, plane: ControlPlane, *, deliver: bool) -> None:
        super().__init__(plane.parts.pool)
        self.deliver = deliver
        self.accepted: list[DispatchResponse] = []
        self.in_transit: list[DispatchRequest] = []
        self.reached = asyncio.Event()

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        if self.deliver:
            self.accepted.append(await super().dispatch(request))
        else:
            self.in_transit.append(request)
        self.reached.set()
        await asyncio.Event().wait()  # the pump process dies while waiting for this reply
        raise AssertionError("unreachable")


async def _kill_pump_mid_dispatch(plane: ControlPlane, provider: DyingPumpProvider) -> None:
    dying = asyncio.create_task(plane.parts.dispatcher.dispatch_next(DEAD_PUMP))
    await asyncio.wait_for(provider.reached.wait(), timeout=10)
    dying.cancel()
    await asyncio.gather(dying, return_exceptions=True)


async def _next_pump_until(plane: ControlPlane, outcome: DispatchOutcome | None) -> DispatchResult:
    """Dispatch with the next pump (the dead claim's lease lapses first) until it returns
    `outcome` (None: anything but EMPTY)."""
    plane.parts.providers.add(LocalRuntimeProvider(plane.parts.pool))
    results: list[DispatchResult] = []

    async def reached() -> bool:
        results.append(await plane.parts.dispatcher.dispatch_next(NEXT_PUMP))
        got = results[-1].outcome
        return got is outcome if outcome is not None else got is not DispatchOutcome.EMPTY

    await wait_until(reached, timeout=10, interval=0.02)
    return results[-1]


async def _local_runs_of(instance: RuntimeInstance, shared_run_id: str) -> list[str]:
    return [v.local_run_id for v in instance.local_runs() if v.shared_run_id == shared_run_id]


async def test_the_next_pump_records_a_run_the_dead_pump_got_accepted_and_never_dispatches_it_again(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, claim_lease_ms=200)
    instance = await start_instance(plane)
    provider = DyingPumpProvider(plane, deliver=True)
    plane.parts.providers.add(provider)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await _kill_pump_mid_dispatch(plane, provider)
        [accepted] = provider.accepted
        assert (await plane.parts.runs.get(submitted.shared_run_id)).status is SharedRunStatus.QUEUED_GLOBALLY  # type: ignore[union-attr]

        result = await _next_pump_until(plane, None)
        run = await plane.parts.runs.get(submitted.shared_run_id)
        assert result.success and result.local_run_id == accepted.local_run_id
        assert run is not None and run.status is SharedRunStatus.DISPATCHED
        assert run.local_run_id == accepted.local_run_id
        assert (await plane.parts.dispatcher.dispatch_next(NEXT_PUMP)).outcome is DispatchOutcome.EMPTY
        final = await instance.wait_for_run(accepted.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED
        assert await _local_runs_of(instance, submitted.shared_run_id) == [accepted.local_run_id]
        view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        assert run_is_done(view) and view.local_run_id == accepted.local_run_id
    finally:
        await plane.stop()


async def test_an_attempt_the_dead_pump_never_delivered_is_abandoned_and_refused_when_it_arrives(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, claim_lease_ms=200)
    instance = await start_instance(plane)
    provider = DyingPumpProvider(plane, deliver=False)
    plane.parts.providers.add(provider)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await _kill_pump_mid_dispatch(plane, provider)
        [in_transit] = provider.in_transit

        dispatched = await _next_pump_until(plane, DispatchOutcome.DISPATCHED)
        with pytest.raises(ConflictError, match="already settled"):
            await LocalRuntimeProvider(plane.parts.pool).dispatch(in_transit)
        assert await _local_runs_of(instance, submitted.shared_run_id) == [dispatched.local_run_id]
    finally:
        await plane.stop()


async def test_a_restarted_control_plane_takes_its_dead_lifes_claims_back_at_once(
    hot_state: HotState,
) -> None:
    """The claim lease is long (30 s): without the restart's expiry the run would wait it out."""
    dead = control_plane(hot_state)
    submitted = await dead.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    claimer = PumpIdentity(
        pump_runtime_instance_id=dead.settings.control_plane_id,
        pump_worker_id="background-pump",
        incarnation="inc_killed",
    )
    assert await dead.parts.queue.claim_next(claimer) is not None

    restarted = control_plane(hot_state)
    await restarted.start()
    try:
        await start_instance(restarted)
        drained = await restarted.drain(5, DEFAULT_TENANT)
        assert [run.shared_run_id for run in drained.runs if run.outcome == "Dispatched"] == [
            submitted.shared_run_id
        ]
    finally:
        await restarted.stop()
