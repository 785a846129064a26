"""Issue 17.6: one claim takes several runs (in queue order, each with its own attempt token),
of several queue partitions at once and never overtaking an older run of another partition,
and runs a pump cycle claimed but did not dispatch go back to Pending at their own place."""

from __future__ import annotations

import math

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.providers import DispatchRequest, DispatchResponse, LocalRuntimeProvider, ProviderError
from runtime_core.queueing import (
    PartitionTurns,
    PumpIdentity,
    PumpRequest,
    PumpStopReason,
    QueueItemStatus,
    SubmitMode,
)
from tests.helpers import queue_clock_passed, wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, ONE_STEP, control_plane, start_instance

pytestmark = pytest.mark.redis_kinds("single", "cluster")

PUMP = PumpIdentity(pump_runtime_instance_id="rt_batch_test", pump_worker_id="pump")
OTHER_PUMP = PumpIdentity(pump_runtime_instance_id="rt_batch_other", pump_worker_id="pump")


class FailingSecondDispatch(LocalRuntimeProvider):
    """The local provider, failing its second dispatch only."""

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane.parts.pool)
        self.calls: list[str] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        self.calls.append(request.shared_run_id or "")
        if len(self.calls) == 2:
            raise ProviderError("injected dispatch failure")
        return await super().dispatch(request)


async def submit(plane: ControlPlane, tenant: ExecutionContextSnapshot = DEFAULT_TENANT) -> str:
    return (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, tenant)).shared_run_id


async def test_one_claim_takes_several_runs_in_queue_order_each_with_its_own_token(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    try:
        runs = [await submit(plane) for _ in range(5)]
        first = await plane.parts.queue.claim_batch(PUMP, limit=3)
        rest = await plane.parts.queue.claim_batch(PUMP, limit=10)
        assert [c.shared_run_id for c in first + rest] == runs
        assert len({c.token for c in first + rest}) == 5
        for claim in first + rest:
            item = await plane.parts.queue.item(claim.shared_run_id)
            assert item is not None and item.status is QueueItemStatus.CLAIMED and item.attempts == 1
        assert await plane.parts.queue.claim_batch(PUMP, limit=3) == []
    finally:
        await plane.stop()


async def test_a_batch_takes_the_runs_of_several_partitions_in_queue_order_and_never_overtakes_one(
    hot_state: HotState,
) -> None:
    """One claim takes runs of every partition at once (tenants' runs interleave across
    partitions: one partition at a time, a pump claimed one run per round trip), in queue
    order; a smaller batch takes the oldest runs and leaves no older one Pending elsewhere."""
    if hot_state.partition_count == 1:
        hot_state.partitions = 4
    plane = control_plane(hot_state, scale_out_enabled=False)
    keys = plane.parts.queue.keys
    try:
        names = (f"batch-tenant-{n}" for n in range(100))
        a = next(n for n in names if keys.of_tenant(n).index != keys.of_tenant("batch-tenant-b").index)
        tenant_a = ExecutionContextSnapshot(user_id="a", tenant_id=a)
        tenant_b = ExecutionContextSnapshot(user_id="b", tenant_id="batch-tenant-b")
        # Queue clocks count milliseconds: each group is queued after the previous one's clock.
        a1, a2 = await submit(plane, tenant_a), await submit(plane, tenant_a)
        await queue_clock_passed(hot_state, keys.of_tenant(a).seq)
        b1 = await submit(plane, tenant_b)
        await queue_clock_passed(hot_state, keys.of_tenant(tenant_b.tenant_id).seq)
        a3, a4 = await submit(plane, tenant_a), await submit(plane, tenant_a)
        turns, batches, taken = PartitionTurns(), [], []
        while claims := await plane.parts.queue.claim_batch(PUMP, turns=turns, limit=2):
            batches.append([c.shared_run_id for c in claims])
            taken += claims
        assert batches == [[a1, a2], [b1, a3], [a4]]
        for claim in taken:
            await plane.parts.queue.requeue_in_place(claim, "claimed again below")
        everything = await plane.parts.queue.claim_batch(PUMP, turns=PartitionTurns(), limit=10)
        assert [c.shared_run_id for c in everything] == [a1, a2, b1, a3, a4]
    finally:
        await plane.stop()


async def test_a_claim_from_a_stale_view_takes_the_older_run_of_the_other_partition(
    hot_state: HotState,
) -> None:
    """A pump's view of the heads is stale once another pump claimed: the partition it picks
    by that view may now start after another partition's head. Then it claims nothing there,
    learns the real head, and takes the older run of the other partition instead."""
    if hot_state.partition_count == 1:
        hot_state.partitions = 4
    plane = control_plane(hot_state, scale_out_enabled=False)
    keys = plane.parts.queue.keys
    queue = plane.parts.queue
    try:
        b = "stale-tenant-b"
        names = (f"stale-tenant-{n}" for n in range(100))
        a = next(n for n in names if keys.of_tenant(n).index != keys.of_tenant(b).index)
        tenant_a = ExecutionContextSnapshot(user_id="a", tenant_id=a)
        tenant_b = ExecutionContextSnapshot(user_id="b", tenant_id=b)
        a0 = await submit(plane, tenant_a)
        await queue_clock_passed(hot_state, keys.of_tenant(a).seq)
        b1 = await submit(plane, tenant_b)
        await queue_clock_passed(hot_state, keys.of_tenant(b).seq)
        a2 = await submit(plane, tenant_a)
        stale = PartitionTurns()
        # `stale` saw a0 as its partition's head; another pump claims a0 meanwhile.
        [taken] = await queue.claim_batch(OTHER_PUMP, turns=PartitionTurns(), limit=1)
        assert taken.shared_run_id == a0
        items = {run: await queue.item(run) for run in (a0, b1)}
        stale.reset({keys.of_tenant(a).index: items[a0].seq, keys.of_tenant(b).index: items[b1].seq}, set())
        stale.read_at = math.inf  # never read again here: the test is about the stale view
        claims = await queue.claim_batch(PUMP, turns=stale, limit=10)
        assert [claim.shared_run_id for claim in claims] == [b1]
        assert [claim.shared_run_id for claim in await queue.claim_batch(PUMP, turns=stale, limit=10)] == [a2]
    finally:
        await plane.stop()


async def test_runs_claimed_together_but_not_dispatched_go_back_to_their_own_place(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    provider = FailingSecondDispatch(plane)
    plane.parts.providers.add(provider)
    await start_instance(plane, worker_count=4, max_concurrent_runs=4)
    try:
        runs = [await submit(plane) for _ in range(4)]
        stopped = await plane.parts.pump.pump(
            PumpRequest(max_dispatch_count=10, stop_on_failure=True, pump=PUMP)
        )
        assert stopped.stop_reason is PumpStopReason.FAILURE
        assert [a.shared_run_id for a in stopped.attempts] == runs[:2]  # the first, then the failure
        for shared_run_id in runs[2:]:  # claimed with the failed run, handed back untouched
            item = await plane.parts.queue.item(shared_run_id)
            assert item is not None and item.status is QueueItemStatus.PENDING
            assert (item.attempts, item.last_requeue_reason) == (1, "not dispatched in its pump cycle")
        resumed = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=10, pump=PUMP))
        # Back at their own place: ahead of the failed run, which went to the tail.
        assert [a.shared_run_id for a in resumed.dispatched] == [runs[2], runs[3], runs[1]]

        async def all_dispatched() -> bool:
            return await plane.parts.queue.pending_count() == 0

        await wait_until(all_dispatched)
    finally:
        await plane.stop()
