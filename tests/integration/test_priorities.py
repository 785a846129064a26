"""Issue 30.2: run priorities and the fairness rule (docs/flow-control.md).

Within an admission group (tenant + tenant group) a higher priority is dispatched first,
oldest first among equals; across groups and queue partitions the turns stay in queue-time
order, so a tenant's high-priority flood never takes another tenant's turn. Runs on a single
node (4 queue partitions) and on the 3-master cluster (16).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import InvalidArgumentError
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import PartitionTurns, PumpIdentity, QueueItemStatus, SubmitMode
from runtime_core.steps import StepInvocation
from tests.helpers import queue_clock_passed, wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    OTHER_SHARED_TENANT,
    GateExecutor,
    control_plane,
    start_instance,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")

PUMP = PumpIdentity(pump_runtime_instance_id="rt_priority_test", pump_worker_id="pump")
RECORDED = parse_pipeline({"name": "recorded", "steps": [{"name": "only", "stepKey": "test.record"}]})
BLOCKER = parse_pipeline({"name": "blocker", "steps": [{"name": "hold", "stepKey": "test.gate"}]})
LOW, HIGH = 1, 9


class RecordingExecutor:
    """`test.record`: notes the `label` of each run it starts, in start order."""

    step_key = "test.record"

    def __init__(self) -> None:
        self.started: list[str] = []

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.started.append(str(invocation.state["label"]))
        return {"data": {}}


def queue_plane(hot_state: HotState) -> ControlPlane:
    """A control plane without instances: the tests read the claim order."""
    return control_plane(hot_state, RecordingExecutor(), scale_out_enabled=False)


@pytest.fixture
def partitioned(hot_state: HotState) -> HotState:
    if hot_state.partition_count == 1:
        hot_state.partitions = 4
    return hot_state


async def submit(
    plane: ControlPlane,
    label: str,
    priority: int | None = None,
    tenant: ExecutionContextSnapshot = DEFAULT_TENANT,
) -> str:
    submitted = await plane.submit(
        RECORDED, {"label": label}, SubmitMode.QUEUE_FIRST, tenant, priority=priority
    )
    return submitted.shared_run_id


async def claimed_labels(plane: ControlPlane, count: int) -> list[str]:
    """The labels of the next `count` claims, in claim order (a fresh view of the partitions)."""
    turns, labels = PartitionTurns(), []
    for _ in range(count):
        claim = await plane.parts.queue.claim_next(PUMP, turns=turns)
        assert claim is not None
        run = await plane.parts.runs.get(claim.shared_run_id)
        assert run is not None
        labels.append(str(run.input["label"]))
    return labels


async def saturated_plane(hot_state: HotState) -> tuple[ControlPlane, RecordingExecutor, GateExecutor]:
    """A control plane with its background pump and one instance with one run slot, held by a
    gated run: everything submitted next waits in the shared queue."""
    recorder, gate = RecordingExecutor(), GateExecutor()
    plane = control_plane(hot_state, recorder, gate, background_pump=True)
    await start_instance(plane, max_concurrent_runs=1)
    await plane.start()
    await plane.submit(BLOCKER, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)

    async def held() -> bool:
        return gate.started == 1

    await wait_until(held)
    return plane, recorder, gate


async def started_at_least(recorder: RecordingExecutor, count: int) -> None:
    async def enough() -> bool:
        return len(recorder.started) >= count

    await wait_until(enough, timeout=30, interval=0.02)


async def test_a_high_priority_run_queued_after_100_low_ones_is_dispatched_next(hot_state: HotState) -> None:
    plane, recorder, gate = await saturated_plane(hot_state)
    try:
        for n in range(100):
            await submit(plane, f"low-{n}", LOW)
        await submit(plane, "high", HIGH)
        gate.release()
        await started_at_least(recorder, 3)
        assert recorder.started[:3] == ["high", "low-0", "low-1"]
    finally:
        await plane.stop()


async def test_a_high_priority_flood_never_takes_another_tenants_turn(partitioned: HotState) -> None:
    """Tenant A has 10 low-priority runs queued, tenant B queues 2 runs, then A floods 30
    high-priority ones: A's highs take A's 10 earlier turns, then B's runs go, then the rest of
    A's flood, then A's lows. B waits for the 10 runs queued before it, not for the flood."""
    plane, recorder, gate = await saturated_plane(partitioned)
    keys = plane.parts.queue.keys
    try:
        for n in range(10):
            await submit(plane, f"a-low-{n}", LOW)
        await queue_clock_passed(partitioned, keys.of_tenant(DEFAULT_TENANT.tenant_id).seq)
        for n in range(2):
            await submit(plane, f"b-{n}", tenant=OTHER_SHARED_TENANT)
        await queue_clock_passed(partitioned, keys.of_tenant(OTHER_SHARED_TENANT.tenant_id).seq)
        for n in range(30):
            await submit(plane, f"a-high-{n}", HIGH)
        gate.release()
        await started_at_least(recorder, 14)
        assert recorder.started[:14] == [
            *(f"a-high-{n}" for n in range(10)),
            "b-0",
            "b-1",
            "a-high-10",
            "a-high-11",
        ]
    finally:
        await plane.stop()


async def test_equal_priorities_keep_queue_order_and_priorities_order_a_claim_batch(
    hot_state: HotState,
) -> None:
    plane = queue_plane(hot_state)
    try:
        for label, priority in [("p5-a", None), ("p3", 3), ("p7-a", 7), ("p5-b", 5), ("p7-b", 7), ("p9", 9)]:
            await submit(plane, label, priority)
        batch = await plane.parts.queue.claim_batch(PUMP, limit=6)
        runs = await plane.parts.runs.get_many([claim.shared_run_id for claim in batch])
        assert [run.input["label"] for run in runs if run is not None] == [
            "p9",
            "p7-a",
            "p7-b",
            "p5-a",
            "p5-b",
            "p3",
        ]
    finally:
        await plane.stop()


async def test_a_run_handed_back_in_place_keeps_its_priority_turn(hot_state: HotState) -> None:
    """No capacity: the claimed high-priority run goes back to Pending with the turn it took, so
    it comes first again; the low-priority run it displaced keeps its place among its peers."""
    plane = queue_plane(hot_state)
    try:
        for n in range(3):
            await submit(plane, f"low-{n}", LOW)
        await submit(plane, "high", HIGH)
        claim = await plane.parts.queue.claim_next(PUMP)
        assert claim is not None
        await plane.parts.queue.requeue_in_place(claim, "no capacity")
        item = await plane.parts.queue.item(claim.shared_run_id)
        assert item is not None and item.status is QueueItemStatus.PENDING and item.priority == HIGH
        assert await claimed_labels(plane, 4) == ["high", "low-0", "low-1", "low-2"]
    finally:
        await plane.stop()


async def test_a_cancelled_high_priority_run_leaves_the_turn_to_the_next_best(hot_state: HotState) -> None:
    plane = queue_plane(hot_state)
    try:
        await submit(plane, "low", LOW)
        high = await submit(plane, "high", HIGH)
        await submit(plane, "mid", 6)
        await plane.cancel(high, DEFAULT_TENANT)
        assert await claimed_labels(plane, 2) == ["mid", "low"]
        assert await plane.parts.queue.claim_next(PUMP) is None
    finally:
        await plane.stop()


async def test_priorities_interleave_with_other_tenants_by_queue_time_across_partitions(
    partitioned: HotState,
) -> None:
    """The claim order alone (no instance): A's runs take A's turns best first, B's turns stay
    where their queue times put them, in whichever partitions the tenants live."""
    plane = queue_plane(partitioned)
    keys = plane.parts.queue.keys
    try:
        clocks = {t.tenant_id: keys.of_tenant(t.tenant_id).seq for t in (DEFAULT_TENANT, OTHER_SHARED_TENANT)}
        plan = [("a-low-0", LOW, DEFAULT_TENANT), ("b-0", None, OTHER_SHARED_TENANT)]
        plan += [("a-low-1", LOW, DEFAULT_TENANT), ("b-1", None, OTHER_SHARED_TENANT)]
        plan += [("a-high-0", HIGH, DEFAULT_TENANT), ("a-high-1", HIGH, DEFAULT_TENANT)]
        for label, priority, tenant in plan:
            await submit(plane, label, priority, tenant)
            await queue_clock_passed(partitioned, clocks[tenant.tenant_id])
        assert await claimed_labels(plane, 6) == ["a-high-0", "b-0", "a-high-1", "b-1", "a-low-0", "a-low-1"]
    finally:
        await plane.stop()


@pytest.mark.parametrize("priority", [0, 10, -1])
async def test_a_priority_out_of_range_is_refused_and_nothing_is_queued(
    hot_state: HotState, priority: int
) -> None:
    plane = queue_plane(hot_state)
    try:
        with pytest.raises(InvalidArgumentError, match="priority"):
            await submit(plane, "bad", priority)
        assert await plane.parts.queue.pending_count() == 0
    finally:
        await plane.stop()


async def test_concurrent_pumps_claim_every_prioritised_run_exactly_once(partitioned: HotState) -> None:
    plane = queue_plane(partitioned)
    try:
        tenants = (DEFAULT_TENANT, OTHER_SHARED_TENANT)
        submitted = {await submit(plane, f"r{n}", 1 + n % 9, tenants[n % 2]) for n in range(60)}
        pumps = [PumpIdentity(pump_runtime_instance_id=f"rt_prio_{n}", pump_worker_id="p") for n in range(3)]

        async def drain(pump: PumpIdentity) -> list[str]:
            taken, turns = [], PartitionTurns()
            while claims := await plane.parts.queue.claim_batch(pump, turns=turns, limit=4):
                taken += [claim.shared_run_id for claim in claims]
            return taken

        taken = [run for runs in await asyncio.gather(*(drain(p) for p in pumps)) for run in runs]
        assert sorted(taken) == sorted(submitted)
    finally:
        await plane.stop()
