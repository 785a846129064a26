"""Issue 17.2: the shared queue partitioned over hash slots.

A tenant's runs live in one partition (its records, items, listing and idempotency keys),
a shared run id names its partition, claims visit the partitions in turn (round-robin) and
stay exactly once, and every reader of the whole queue (counts, metrics, claim expiry) sees
every partition. On a single Redis the tests ask for 4 partitions; on the 3-master cluster
they run with the cluster default (16).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.identity import ExecutionContextSnapshot, new_shared_run_id, shared_run_partition
from runtime_core.queueing import (
    PartitionTurns,
    PumpIdentity,
    PumpRequest,
    PumpStopReason,
    SharedQueue,
    SharedQueueKeys,
    SubmitMode,
    adopt_recorded_partitions,
)
from tests.helpers import queue_clock_passed
from tests.integration.control_plane_support import ONE_STEP, control_plane, start_instance

pytestmark = pytest.mark.redis_kinds("single", "cluster")

SINGLE_NODE_PARTITIONS = 4


@pytest.fixture
def partitioned(hot_state: HotState) -> HotState:
    if hot_state.partition_count == 1:
        hot_state.partitions = SINGLE_NODE_PARTITIONS
    return hot_state


def tenants_in_distinct_partitions(keys: SharedQueueKeys, count: int) -> list[ExecutionContextSnapshot]:
    """`count` tenants, each in a partition of its own."""
    chosen: dict[int, str] = {}
    for n in itertools.count():
        name = f"tenant-{n}"
        chosen.setdefault(keys.of_tenant(name).index, name)
        if len(chosen) == count:
            break
    return [ExecutionContextSnapshot(user_id=f"user-{t}", tenant_id=t) for t in chosen.values()]


def pump(n: int) -> PumpIdentity:
    return PumpIdentity(pump_runtime_instance_id=f"rt_partition_test_{n}", pump_worker_id="pump")


async def submit(plane: ControlPlane, tenant: ExecutionContextSnapshot, **kwargs: object) -> str:
    return (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, tenant, **kwargs)).shared_run_id  # type: ignore[arg-type]


def test_a_shared_run_id_names_its_partition() -> None:
    assert shared_run_partition(new_shared_run_id(0), 4) == 0
    assert new_shared_run_id(0).count("-p") == 0  # an unpartitioned queue's ids are unchanged
    assert shared_run_partition(new_shared_run_id(3), 4) == 3
    for foreign in ("srun_x-p9", "srun_x-p", "srun_x-p-1", "srun_x-p²", "srun_plain", ""):
        assert shared_run_partition(foreign, 4) == 0  # outside the layout: partition 0, never an error


async def test_a_tenants_runs_live_in_its_partition_and_every_read_finds_them(partitioned: HotState) -> None:
    plane = control_plane(partitioned, scale_out_enabled=False)
    keys = plane.parts.queue.keys
    await plane.start()
    try:
        tenants = tenants_in_distinct_partitions(keys, 3)
        runs = {t.tenant_id: [await submit(plane, t) for _ in range(2)] for t in tenants}
        for tenant in tenants:
            partition = keys.of_tenant(tenant.tenant_id)
            for shared_run_id in runs[tenant.tenant_id]:
                assert keys.of_run(shared_run_id) == partition
                assert await partitioned.redis.exists(partition.run(shared_run_id)) == 1
                status = await plane.run_status(shared_run_id, tenant)
                assert status.shared_run_id == shared_run_id
            listed = [r.shared_run_id for r in await plane.parts.runs.list_tenant(tenant.tenant_id)]
            assert sorted(listed) == sorted(runs[tenant.tenant_id])
            assert await plane.parts.queue.pending_count_of_tenant(tenant.tenant_id) == 2
        assert await plane.parts.queue.pending_count() == 6
        assert await plane.parts.queue.pending_count_by_tenant() == Counter({t.tenant_id: 2 for t in tenants})
        by_status = await plane.parts.runs.count_by_status()
        assert {tenant: n for (tenant, _status), n in by_status.items()} == {t.tenant_id: 2 for t in tenants}
    finally:
        await plane.stop()


async def test_an_idempotency_key_is_claimed_in_its_tenants_partition(partitioned: HotState) -> None:
    plane = control_plane(partitioned, scale_out_enabled=False)
    try:
        tenant = next(
            t
            for t in tenants_in_distinct_partitions(plane.parts.queue.keys, 2)
            if plane.parts.queue.keys.of_tenant(t.tenant_id).index != 0
        )
        first = await submit(plane, tenant, idempotency_key="once")
        again = await submit(plane, tenant, idempotency_key="once")
        assert again == first
        assert plane.parts.queue.keys.of_run(first).index != 0
        assert await plane.parts.queue.pending_count() == 1
    finally:
        await plane.stop()


async def test_claims_follow_the_queue_order_across_partitions(partitioned: HotState) -> None:
    """Fairness rule across partitions: the partition whose oldest Pending run is oldest goes
    first (a queue clock in ms), so runs of three tenants in three partitions, submitted in
    turn, are claimed in submit order, not partition by partition (runs queued within the
    same millisecond may swap places: each ends at most 2 places from its submit position)."""
    plane = control_plane(partitioned, scale_out_enabled=False)
    try:
        tenants = tenants_in_distinct_partitions(plane.parts.queue.keys, 3)
        submitted = [await submit(plane, tenants[n % 3]) for n in range(12)]
        claimed, turns = [], PartitionTurns()
        while (claim := await plane.parts.queue.claim_next(pump(0), turns=turns)) is not None:
            claimed.append(claim.shared_run_id)
        assert sorted(claimed) == sorted(submitted)
        displacement = [abs(claimed.index(run) - n) for n, run in enumerate(submitted)]
        assert max(displacement) <= 2, displacement
        for tenant in tenants:  # FIFO inside a partition, always
            mine = [
                r
                for r in submitted
                if plane.parts.queue.keys.of_run(r) == plane.parts.queue.keys.of_tenant(tenant.tenant_id)
            ]
            assert [r for r in claimed if r in mine] == mine
    finally:
        await plane.stop()


async def test_a_burst_in_one_partition_neither_jumps_ahead_nor_holds_back_other_runs(
    partitioned: HotState,
) -> None:
    """A tenant queueing many runs at once does not make an earlier run of another partition
    wait behind them, and a run queued elsewhere after the burst's queue clock waits behind it
    (a partition queueing more than one run per millisecond runs its clock ahead by the
    excess: a burst is ordered as if it had been queued one run per millisecond)."""
    plane = control_plane(partitioned, scale_out_enabled=False)
    keys = plane.parts.queue.keys
    try:
        early, busy = tenants_in_distinct_partitions(keys, 2)
        first = await submit(plane, early)
        burst = await asyncio.gather(*(submit(plane, busy) for _ in range(20)))
        await queue_clock_passed(partitioned, keys.of_tenant(busy.tenant_id).seq)
        last = await submit(plane, early)
        claimed = []
        while (claim := await plane.parts.queue.claim_next(pump(0))) is not None:
            claimed.append(claim.shared_run_id)
        assert claimed[0] == first and claimed[-1] == last
        assert sorted(claimed[1:-1]) == sorted(burst)
    finally:
        await plane.stop()


async def test_concurrent_pumps_claim_every_run_of_every_partition_exactly_once(
    partitioned: HotState,
) -> None:
    plane = control_plane(partitioned, scale_out_enabled=False)
    try:
        tenants = tenants_in_distinct_partitions(plane.parts.queue.keys, 3)
        submitted = await asyncio.gather(*(submit(plane, tenants[n % 3]) for n in range(90)))
        pumps = [SharedQueue(partitioned) for _ in range(4)]

        async def claim_all(n: int) -> list[str]:
            claimed = []
            while (claim := await pumps[n].claim_next(pump(n))) is not None:
                claimed.append(claim.shared_run_id)
            return claimed

        results = await asyncio.gather(*(claim_all(n) for n in range(4)))
        every = [shared_run_id for claimed in results for shared_run_id in claimed]
        assert Counter(every) == Counter(submitted)  # none twice, none lost
        assert await plane.parts.queue.pending_count() == 0
    finally:
        await plane.stop()


async def test_a_pump_cycle_dispatches_the_runs_of_every_partition(partitioned: HotState) -> None:
    plane = control_plane(partitioned, scale_out_enabled=False)
    await start_instance(plane)
    try:
        tenants = tenants_in_distinct_partitions(plane.parts.queue.keys, 3)
        submitted = [await submit(plane, t) for t in tenants]
        result = await plane.parts.pump.pump(PumpRequest(pump=pump(0)))
        assert sorted(a.shared_run_id or "" for a in result.dispatched) == sorted(submitted)
        assert result.stop_reason is PumpStopReason.EMPTY
    finally:
        await plane.stop()


async def test_the_claims_of_an_earlier_life_expire_in_every_partition(partitioned: HotState) -> None:
    plane = control_plane(partitioned, scale_out_enabled=False)
    try:
        tenants = tenants_in_distinct_partitions(plane.parts.queue.keys, 2)
        for tenant in tenants:
            await submit(plane, tenant)
        earlier = PumpIdentity(
            pump_runtime_instance_id="control-plane:host", pump_worker_id="p", incarnation="inc_old"
        )
        claims = [await plane.parts.queue.claim_next(earlier) for _ in tenants]
        assert all(claims)
        expired = await plane.parts.queue.expire_claims_of_earlier_lives("control-plane:host/", "inc_new")
        assert expired == 2
        again = [await plane.parts.queue.claim_next(pump(1)) for _ in tenants]
        assert sorted((c.shared_run_id, c.unsettled) for c in again if c) == sorted(
            (c.shared_run_id, [c.token]) for c in claims if c
        )
    finally:
        await plane.stop()


async def test_every_process_follows_the_partition_count_recorded_in_redis(
    partitioned: HotState, redis_target: object
) -> None:
    keys = SharedQueueKeys(partitioned)
    recorded = await adopt_recorded_partitions(keys)
    assert recorded == partitioned.partition_count
    other = connect_hot_state(redis_target.url, prefix=partitioned.prefix)  # type: ignore[attr-defined]
    other.partitions = recorded + 1  # configured otherwise
    try:
        assert await adopt_recorded_partitions(SharedQueueKeys(other)) == recorded
        assert other.partition_count == recorded
    finally:
        await other.close()


async def test_a_queue_written_before_counts_were_recorded_stays_one_partition(
    partitioned: HotState,
) -> None:
    keys = SharedQueueKeys(partitioned)
    await partitioned.redis.set(keys.partition(0).seq, "7")  # an unpartitioned queue's counter
    assert await adopt_recorded_partitions(keys) == 1
    assert partitioned.partition_count == 1


async def test_a_burst_into_one_partition_never_pushes_back_a_run_queued_after_it_elsewhere(
    hot_state: HotState,
) -> None:
    """Queue clocks count microseconds: a partition taking a burst of runs (faster than one per
    millisecond) keeps its clock at the time they were queued, so a run queued in another
    partition after the burst is claimed after every run of it."""
    if hot_state.partition_count == 1:
        hot_state.partitions = 4
    plane = control_plane(hot_state, scale_out_enabled=False)
    keys = plane.parts.queue.keys
    try:
        late = "burst-tenant-late"
        names = (f"burst-tenant-{n}" for n in range(100))
        bursty = next(n for n in names if keys.of_tenant(n).index != keys.of_tenant(late).index)
        snapshot = ExecutionContextSnapshot(user_id="u", tenant_id=bursty)
        burst = await asyncio.gather(
            *(plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, snapshot) for _ in range(200))
        )
        last = await plane.submit(
            ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ExecutionContextSnapshot(user_id="u", tenant_id=late)
        )
        turns = PartitionTurns()
        claimed: list[str] = []
        while claims := await plane.parts.queue.claim_batch(pump(0), turns=turns, limit=16):
            claimed += [claim.shared_run_id for claim in claims]
        assert claimed[-1] == last.shared_run_id
        assert sorted(claimed[:-1]) == sorted(run.shared_run_id for run in burst)
    finally:
        await plane.stop()
