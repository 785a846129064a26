"""Seed 001: queue-first submit, manual drain, dispatch failure, no double dispatch, pump identity."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import ConflictError
from runtime_core.flow import GcraCell
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.identity import ExecutionContextSnapshot, current_snapshot, restored_snapshot
from runtime_core.instances import (
    AdmissionController,
    InstanceRegistry,
    LocalRunRequest,
    LocalRunStatus,
    ReservationStore,
    admission_group,
)
from runtime_core.pipeline import parse_pipeline
from runtime_core.providers import DispatchRequest, DispatchResponse, LocalRuntimeProvider, ProviderError
from runtime_core.queueing import (
    DispatchOutcome,
    IdempotencyKey,
    PumpIdentity,
    PumpRequest,
    PumpStopReason,
    QueueClaim,
    QueueItemStatus,
    QueueTransition,
    RunDelivery,
    SharedQueue,
    SharedQueueDispatcher,
    SharedQueuePump,
    SharedRunRecord,
    SharedRunStatus,
    SharedRunStore,
    SubmitMode,
)
from tests.helpers import command_calls, wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    ONE_STEP,
    OPERATOR,
    OTHER_SHARED_TENANT,
    TENANT_A,
    control_plane,
    start_instance,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")

PUMP = PumpIdentity(pump_runtime_instance_id="rt_testhost:control-plane", pump_worker_id="test-pump")


class FailingProvider(LocalRuntimeProvider):
    """The local provider, failing its first `fail_times` dispatches; records the ambient context."""

    def __init__(self, plane: ControlPlane, fail_times: int) -> None:
        super().__init__(plane.parts.pool)
        self.fail_times = fail_times
        self.contexts: list[ExecutionContextSnapshot | None] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        self.contexts.append(current_snapshot())
        if len(self.contexts) <= self.fail_times:
            raise ProviderError("injected dispatch failure")
        return await super().dispatch(request)


class LostReplyProvider(LocalRuntimeProvider):
    """The local provider delivering each dispatch to the instance, then losing its reply."""

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane.parts.pool)
        self.accepted: list[DispatchResponse] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        self.accepted.append(await super().dispatch(request))
        raise ProviderError("injected: the dispatch reply was lost")


class SlowReplyProvider(LocalRuntimeProvider):
    """The local provider delivering each dispatch, then answering only after `meanwhile` ran
    (what happened while the reply was on its way)."""

    def __init__(self, plane: ControlPlane, meanwhile: Callable[[], Awaitable[None]]) -> None:
        super().__init__(plane.parts.pool)
        self.meanwhile = meanwhile
        self.accepted: list[DispatchResponse] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        self.accepted.append(await super().dispatch(request))
        await self.meanwhile()
        return self.accepted[-1]


class LateArrivalProvider(LocalRuntimeProvider):
    """The local provider failing every dispatch before delivery; keeps each request (in transit)."""

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane.parts.pool)
        self.in_transit: list[DispatchRequest] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        self.in_transit.append(request)
        raise ProviderError("injected: no reply yet")


async def test_queue_first_submit_is_queued_globally_with_snapshot_and_no_local_identities(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    result = await plane.submit(ONE_STEP, {"x": 1}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    run = await plane.parts.runs.get(result.shared_run_id)
    item = await plane.parts.queue.item(result.shared_run_id)
    assert result.status is SharedRunStatus.QUEUED_GLOBALLY
    assert run is not None and run.status is SharedRunStatus.QUEUED_GLOBALLY
    assert item is not None and item.status is QueueItemStatus.PENDING
    assert run.snapshot == DEFAULT_TENANT
    assert run.local_run_id is None and run.assigned_runtime_instance_id is None
    assert await plane.parts.index.get_by_shared(result.shared_run_id) is None


async def test_manual_drain_dispatches_a_queue_first_run_that_then_completes(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        drained = await plane.drain(10, DEFAULT_TENANT)
        run = await plane.parts.runs.get(submitted.shared_run_id)
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert drained.dispatched == 1 and drained.stop_reason == PumpStopReason.EMPTY.value
        assert run is not None and run.status is SharedRunStatus.DISPATCHED
        assert item is not None and item.status is QueueItemStatus.DISPATCHED
        assert run.local_run_id and run.local_run_id.startswith("lrun_")
        assert run.assigned_runtime_instance_id == instance.runtime_instance_id
        final = await instance.wait_for_run(run.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED
        assert final.execution_id and final.execution_id.startswith("exec_")
    finally:
        await plane.stop()


async def test_a_pump_dispatches_only_to_instances_its_process_can_reach(hot_state: HotState) -> None:
    """Two control planes on one Redis, each hosting its own in-process instance (as two `serve`
    processes do): each one's pump assigns runs to its own instance only, never to the other's
    (which its in-process provider cannot reach), and no dispatch fails."""
    planes = [control_plane(hot_state, host=f"plane{n}") for n in range(2)]
    instances = [
        await start_instance(
            plane, n=n + 1, max_concurrent_runs=8, worker_count=8, max_local_workers_per_execution=1
        )
        for n, plane in enumerate(planes)
    ]
    try:
        for plane, instance in zip(planes, instances, strict=True):
            for _ in range(4):
                await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
            drained = await plane.drain(4, DEFAULT_TENANT)
            assert drained.dispatched == 4, drained
            assert {run.assigned_runtime_instance_id for run in drained.runs} == {
                instance.runtime_instance_id
            }
    finally:
        for plane in planes:
            await plane.stop()


async def test_the_instance_releases_a_reservation_with_the_first_capacity_that_counts_the_run(
    hot_state: HotState,
) -> None:
    """The dispatcher no longer releases after marking: the instance's heartbeat does, once the
    capacity it publishes counts the accepted run; other holders stay reserved."""
    plane = control_plane(hot_state)
    instance = await start_instance(plane, max_concurrent_runs=3)
    reservations = ReservationStore(hot_state)
    rid = instance.runtime_instance_id
    try:
        for holder in ("srun_accepted", "srun_elsewhere"):
            assert (await reservations.reserve(rid, holder, 60_000)).outcome.held
        await instance.pause_queue(reason="keep the run queued")
        assert await reservations.held_count(rid) == 2
        request = LocalRunRequest(
            pipeline=ONE_STEP, input={}, snapshot=DEFAULT_TENANT, shared_run_id="srun_accepted"
        )
        await instance.enqueue(request)  # answers once its capacity is published
        assert await reservations.held_count(rid) == 1
        [entry] = [e for e in await plane.parts.registry.entries() if e.runtime_instance_id == rid]
        assert entry.capacity.available_run_slots == 2  # the queued run counts in what it published
        await instance.publish()
        assert await reservations.held_count(rid) == 1  # srun_elsewhere: not accepted here

        await instance.resume_queue()
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        result = await plane.parts.dispatcher.dispatch_next(PUMP)
        assert result.success and result.shared_run_id == submitted.shared_run_id
        assert await reservations.held_count(rid) == 1
    finally:
        await plane.stop()


async def test_failed_dispatch_returns_item_to_pending_without_local_run_or_execution(
    hot_state: HotState, caplog: pytest.LogCaptureFixture
) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    provider = FailingProvider(plane, fail_times=1)
    plane.parts.providers.add(provider)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        with caplog.at_level("WARNING", logger="runtime_core.queueing"):
            result = await plane.parts.dispatcher.dispatch_next(PUMP)
        [logged] = [r for r in caplog.records if r.getMessage().startswith("dispatch.failed")]
        assert getattr(logged, "shared_run_id", None) == submitted.shared_run_id
        assert getattr(logged, "runtime_instance_id", None) == instance.runtime_instance_id
        assert "injected dispatch failure" in getattr(logged, "error", "")
        run = await plane.parts.runs.get(submitted.shared_run_id)
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert result.success is False and result.outcome is DispatchOutcome.FAILED
        assert item is not None and item.status is QueueItemStatus.PENDING
        assert run is not None and run.status is SharedRunStatus.QUEUED_GLOBALLY
        assert run.local_run_id is None
        assert await plane.parts.index.get_by_shared(submitted.shared_run_id) is None
        assert instance.local_runs() == []
        assert await ReservationStore(hot_state).held_count(instance.runtime_instance_id) == 0
    finally:
        await plane.stop()


async def test_dispatch_accepted_before_its_reply_was_lost_is_recorded_once_and_runs_once(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    provider = LostReplyProvider(plane)
    plane.parts.providers.add(provider)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        result = await plane.parts.dispatcher.dispatch_next(PUMP)
        [accepted] = provider.accepted
        run = await plane.parts.runs.get(submitted.shared_run_id)
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert result.success and result.local_run_id == accepted.local_run_id
        assert run is not None and run.status is SharedRunStatus.DISPATCHED
        assert run.local_run_id == accepted.local_run_id
        assert run.assigned_runtime_instance_id == instance.runtime_instance_id
        assert item is not None and item.status is QueueItemStatus.DISPATCHED
        assert (await plane.parts.dispatcher.dispatch_next(PUMP)).outcome is DispatchOutcome.EMPTY
        assert provider.accepted == [accepted]

        final = await instance.wait_for_run(accepted.local_run_id, timeout=10)
        records = [
            r
            for r in await plane.parts.index.list_tenant(DEFAULT_TENANT)
            if r.shared_run_id == submitted.shared_run_id
        ]
        assert final.status is LocalRunStatus.COMPLETED and final.execution_id
        assert [(r.local_run_id, r.execution_id) for r in records] == [
            (accepted.local_run_id, final.execution_id)
        ]
        assert [v.local_run_id for v in instance.local_runs()] == [accepted.local_run_id]
        assert await ReservationStore(hot_state).held_count(instance.runtime_instance_id) == 0
    finally:
        await plane.stop()


async def test_a_run_accepted_after_its_claim_lapsed_is_left_to_the_next_claimer_and_runs_once(
    hot_state: HotState, tmp_path: Path
) -> None:
    """The claim lapsed while the dispatch's reply was on its way (another pump claimed the
    run): its recording is refused, and the run the instance accepted is not cancelled, for
    the next claimer settles that attempt and records it."""
    gate = tmp_path / "gate"
    held = {"name": "hold", "stepKey": "test.wait_for_file", "config": {"path": str(gate), "maxPollMs": 20}}
    plane = control_plane(hot_state, claim_lease_ms=200)
    instance = await start_instance(plane)
    other = PumpIdentity(pump_runtime_instance_id="rt_testhost:control-plane", pump_worker_id="other-pump")
    taken: list[QueueClaim] = []

    async def claimed_by_another_pump() -> None:
        async def claimed() -> bool:
            claim = await plane.parts.queue.claim_next(other)
            taken.extend([claim] if claim else [])
            return bool(taken)

        await wait_until(claimed, timeout=5, interval=0.05)

    provider = SlowReplyProvider(plane, claimed_by_another_pump)
    plane.parts.providers.add(provider)
    try:
        pipeline = parse_pipeline({"name": "held", "steps": [held]})
        submitted = await plane.submit(pipeline, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        late = await plane.parts.dispatcher.dispatch_next(PUMP)
        [accepted], [taken_over] = provider.accepted, taken
        assert late.outcome is DispatchOutcome.CLAIM_LOST
        # The other pump stepped back without dispatching; the next claimer settles the attempt.
        assert (await plane.parts.queue.requeue(taken_over, "stepped back")).applied
        plane.parts.providers.add(LocalRuntimeProvider(plane.parts.pool))
        recorded = await plane.parts.dispatcher.dispatch_next(PUMP)
        assert recorded.success and recorded.local_run_id == accepted.local_run_id
        gate.write_text("open", encoding="utf-8")
        final = await instance.wait_for_run(accepted.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED
        assert [v.local_run_id for v in instance.local_runs()] == [accepted.local_run_id]
        run = await plane.parts.runs.get(submitted.shared_run_id)
        assert run is not None and run.local_run_id == accepted.local_run_id
    finally:
        await plane.stop()


async def test_a_recording_sent_again_after_its_reply_was_lost_answers_applied_and_changes_nothing(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane)
    queue = plane.parts.queue
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        claim = await queue.claim_next(PUMP)
        assert claim is not None
        fields = {"local_run_id": "lrun_first", "assigned_runtime_instance_id": "rt_x"}
        first = await queue.mark_dispatched(submitted.shared_run_id, claim.token, fields)
        marked = await plane.parts.runs.get(submitted.shared_run_id)
        again = await queue.mark_dispatched(submitted.shared_run_id, claim.token, fields)
        other = await queue.mark_dispatched(submitted.shared_run_id, "another-token", fields)
        assert first.applied and again.applied and not other.applied
        assert await plane.parts.runs.get(submitted.shared_run_id) == marked
    finally:
        await plane.stop()


async def test_dispatch_arriving_after_its_failed_call_was_requeued_is_refused_and_runs_once(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    late = LateArrivalProvider(plane)
    plane.parts.providers.add(late)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        failed = await plane.parts.dispatcher.dispatch_next(PUMP)
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert failed.outcome is DispatchOutcome.FAILED
        assert item is not None and item.status is QueueItemStatus.PENDING

        [in_transit] = late.in_transit
        with pytest.raises(ConflictError, match="already settled"):
            await LocalRuntimeProvider(plane.parts.pool).dispatch(in_transit)
        assert instance.local_runs() == []

        plane.parts.providers.add(LocalRuntimeProvider(plane.parts.pool))
        redispatched = await plane.parts.dispatcher.dispatch_next(PUMP)
        assert redispatched.success and redispatched.local_run_id
        final = await instance.wait_for_run(redispatched.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED
        assert [v.local_run_id for v in instance.local_runs()] == [redispatched.local_run_id]
    finally:
        await plane.stop()


async def test_restored_tenant_context_does_not_leak_into_the_next_dispatch(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane)
    provider = FailingProvider(plane, fail_times=1)
    plane.parts.providers.add(provider)
    try:
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, OTHER_SHARED_TENANT)
        with restored_snapshot(OPERATOR):
            failed = await plane.parts.dispatcher.dispatch_next(PUMP)
            assert current_snapshot() == OPERATOR
            dispatched = await plane.parts.dispatcher.dispatch_next(PUMP)
            assert current_snapshot() == OPERATOR
        assert failed.outcome is DispatchOutcome.FAILED and dispatched.success
        # Which tenant's run comes first depends on the queue partitions (in turn, not FIFO).
        by_tenant = {s.tenant_id: s for s in (DEFAULT_TENANT, OTHER_SHARED_TENANT)}
        assert {failed.tenant_id, dispatched.tenant_id} == set(by_tenant)
        assert provider.contexts == [by_tenant[failed.tenant_id or ""], by_tenant[dispatched.tenant_id or ""]]
    finally:
        await plane.stop()


async def test_dispatch_without_an_ambient_context_clears_the_restored_one(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane)
    plane.parts.providers.add(FailingProvider(plane, fail_times=1))
    try:
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        assert current_snapshot() is None
        await plane.parts.dispatcher.dispatch_next(PUMP)
        assert current_snapshot() is None
    finally:
        await plane.stop()


async def test_four_concurrent_pumps_dispatch_each_of_200_shared_runs_exactly_once(
    hot_state: HotState, redis_target
) -> None:
    plane = control_plane(hot_state)
    sizes = {"worker_count": 200, "max_local_workers_per_execution": 1, "max_concurrent_runs": 200}
    instances = [await start_instance(plane, n=n, local_queue_capacity=200, **sizes) for n in (1, 2)]
    connections = [connect_hot_state(redis_target.url, prefix=hot_state.prefix) for _ in range(4)]
    try:
        ids = [
            (await plane.submit(ONE_STEP, {"i": i}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
            for i in range(200)
        ]
        pumps = [_pump_on(plane, connection) for connection in connections]
        results = await asyncio.gather(
            *(
                pump.pump(
                    PumpRequest(
                        max_dispatch_count=200,
                        pump=PumpIdentity(pump_runtime_instance_id="rt_cp", pump_worker_id=f"p{n}"),
                    )
                )
                for n, pump in enumerate(pumps)
            )
        )
        dispatched = Counter(a.shared_run_id for r in results for a in r.dispatched)
        delivered = Counter(run.shared_run_id for i in instances for run in i.local_runs())
        assert set(dispatched) == set(ids) and set(dispatched.values()) == {1}
        assert set(delivered) == set(ids) and set(delivered.values()) == {1}
        for shared_run_id in ids:
            record = await plane.parts.runs.get(shared_run_id)
            assert record is not None and record.status is SharedRunStatus.DISPATCHED
    finally:
        for connection in connections:
            await connection.close()
        await plane.stop()


def _pump_on(plane: ControlPlane, connection: HotState) -> SharedQueuePump:
    """A pump with its own Redis connection, as a separate control-plane process would have."""
    registry = InstanceRegistry(connection, plane.parts.tenants)
    dispatcher = SharedQueueDispatcher(
        SharedRunStore(connection),
        SharedQueue(connection),
        AdmissionController(registry),
        RunDelivery(ReservationStore(connection), plane.parts.providers),
    )
    return SharedQueuePump(dispatcher)


async def test_pump_identity_does_not_become_the_assigned_runtime_instance(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    pump_host = await start_instance(plane, n=1)
    target = await start_instance(plane, n=2)
    await pump_host.pause_queue(reason="the pump host takes no runs")
    identity = PumpIdentity(pump_runtime_instance_id=pump_host.runtime_instance_id, pump_worker_id="w0")
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        result = await plane.parts.dispatcher.dispatch_next(identity)
        run = await plane.parts.runs.get(submitted.shared_run_id)
        assert result.success
        assert run is not None
        assert run.pump_runtime_instance_id == pump_host.runtime_instance_id and run.pump_worker_id == "w0"
        assert run.assigned_runtime_instance_id == target.runtime_instance_id
    finally:
        await plane.stop()


async def test_missing_shared_run_fails_its_queue_item_without_dispatching(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await hot_state.redis.delete(plane.parts.runs.keys.run(submitted.shared_run_id))
        result = await plane.parts.dispatcher.dispatch_next(PUMP)
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert result.outcome is DispatchOutcome.ABANDONED
        assert item is not None and item.status is QueueItemStatus.FAILED
        assert await plane.parts.queue.pending_count() == 0
        assert instance.local_runs() == []
    finally:
        await plane.stop()


async def test_expired_claim_of_a_dead_pump_returns_to_pending_and_dispatches_once(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, claim_lease_ms=100)
    await start_instance(plane)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        dead_claim = await plane.parts.queue.claim_next(PUMP)
        assert dead_claim is not None

        async def reclaimed() -> bool:
            return (await plane.parts.dispatcher.dispatch_next(PUMP)).success

        await wait_until(reclaimed, timeout=5)
        late = await plane.parts.queue.mark_dispatched(submitted.shared_run_id, dead_claim.token, {})
        assert late.applied is False
    finally:
        await plane.stop()


async def test_pump_stops_at_max_dispatch_count_then_on_empty_queue(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane, max_concurrent_runs=10, worker_count=10, max_local_workers_per_execution=1)
    try:
        for _ in range(3):
            await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        first = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=2, pump=PUMP))
        second = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=10, pump=PUMP))
        assert (first.stop_reason, len(first.dispatched)) == (PumpStopReason.MAX_COUNT, 2)
        assert (second.stop_reason, len(second.dispatched)) == (PumpStopReason.EMPTY, 1)
    finally:
        await plane.stop()


async def test_pump_stops_on_failure_when_stop_on_failure_is_set(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane)
    plane.parts.providers.add(FailingProvider(plane, fail_times=5))
    try:
        for _ in range(2):
            await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        result = await plane.parts.pump.pump(
            PumpRequest(max_dispatch_count=10, stop_on_failure=True, pump=PUMP)
        )
        assert result.stop_reason is PumpStopReason.FAILURE and len(result.attempts) == 1
        assert await plane.parts.queue.pending_count() == 2
    finally:
        await plane.stop()


async def test_pump_stops_when_cancellation_is_requested(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane)
    cancel = asyncio.Event()
    try:
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        cancel.set()
        result = await plane.parts.pump.pump(PumpRequest(pump=PUMP), cancel=cancel)
        assert result.stop_reason is PumpStopReason.CANCELLED and result.attempts == []
        assert await plane.parts.queue.pending_count() == 1
    finally:
        await plane.stop()


async def test_pump_without_any_capacity_claims_nothing(hot_state: HotState) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    try:
        ids = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
            for _ in range(3)
        ]
        seqs_before = [item.seq for item in [await plane.parts.queue.item(i) for i in ids] if item]
        result = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=100, pump=PUMP))
        assert result.stop_reason is PumpStopReason.NO_CAPACITY and result.attempts == []
        items = [await plane.parts.queue.item(shared_run_id) for shared_run_id in ids]
        # No instance could take any run: none was claimed, every run keeps its place.
        assert [(i.status, i.attempts, i.seq) for i in items if i is not None] == [
            (QueueItemStatus.PENDING, 0, seq) for seq in seqs_before
        ]
    finally:
        await plane.stop()


async def test_pump_without_visible_capacity_requeues_one_run_and_passes_over_its_group(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    # A Shared instance never visible to Dedicated tenant-a: capacity exists, not for its runs.
    await start_instance(plane)
    try:
        ids = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT_A)).shared_run_id
            for _ in range(3)
        ]
        result = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=100, pump=PUMP))
        assert result.stop_reason is PumpStopReason.NO_CAPACITY
        assert [a.shared_run_id for a in result.attempts] == ids[:1]
        items = [await plane.parts.queue.item(shared_run_id) for shared_run_id in ids]
        assert all(item is not None and item.status is QueueItemStatus.PENDING for item in items)
        # Only the first run was claimed; the others of its group were never touched, and it
        # went back to its own place: the tenant's runs keep their order.
        assert [item.attempts for item in items if item is not None] == [1, 0, 0]
        seqs = [item.seq for item in items if item is not None]
        assert seqs == sorted(seqs)
    finally:
        await plane.stop()


async def test_a_saturated_tenant_does_not_hold_back_another_tenants_runs_in_the_same_cycle(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    # Shared: visible to the default tenant, never to Dedicated tenant-a. One worker per run, so
    # the instance still has capacity for the second runnable run once the first one started.
    await start_instance(plane, max_local_workers_per_execution=1)
    try:
        blocked = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT_A)).shared_run_id
            for _ in range(3)
        ]
        runnable = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
            for _ in range(2)
        ]
        result = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=100, pump=PUMP))
        outcomes = [(a.shared_run_id, a.outcome) for a in result.attempts]
        assert outcomes == [
            (blocked[0], DispatchOutcome.NO_CAPACITY),
            (runnable[0], DispatchOutcome.DISPATCHED),
            (runnable[1], DispatchOutcome.DISPATCHED),
        ]
        assert result.stop_reason is PumpStopReason.NO_CAPACITY
        pending = [await plane.parts.queue.item(shared_run_id) for shared_run_id in blocked]
        assert [(i.status, i.attempts) for i in pending if i is not None] == [
            (QueueItemStatus.PENDING, 1),
            (QueueItemStatus.PENDING, 0),
            (QueueItemStatus.PENDING, 0),
        ]
    finally:
        await plane.stop()


async def _claim_reads(hot_state: HotState, plane: ControlPlane, skip: frozenset[str]) -> tuple[str, int]:
    """One claim passing over `skip`: the run it claimed and how many items it read (HGETs)."""
    before = await command_calls(hot_state, "cmdstat_hget")
    claim = await plane.parts.queue.claim_next(PUMP, skip)
    reads = await command_calls(hot_state, "cmdstat_hget") - before
    assert claim is not None
    return claim.shared_run_id, reads


async def test_passing_over_a_saturated_group_reads_a_few_items_not_the_whole_queue(
    hot_state: HotState,
) -> None:
    """Issue 17.2: the per-group pending index. 400 runs of a saturated tenant at the head of
    the queue cost the claim of the next tenant's run the same few reads as 4 do; across the
    groups not passed over the queue stays FIFO; cancelled and claimed runs leave no trace."""
    hot_state.partitions = 1  # the index of one partition, holding both tenants' runs
    plane = control_plane(hot_state, scale_out_enabled=False)
    submit = plane.submit
    try:
        warm_up = (await submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
        assert (await _claim_reads(hot_state, plane, frozenset()))[0] == warm_up  # builds the index
        few = [(await submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT_A)).shared_run_id for _ in range(4)]
        first_other = (await submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
        saturated = frozenset({admission_group(TENANT_A)})
        claimed, reads_behind_few = await _claim_reads(hot_state, plane, saturated)
        assert claimed == first_other

        many = await asyncio.gather(
            *(submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT_A) for _ in range(400))
        )
        cancelled = (await submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
        await plane.cancel(cancelled, DEFAULT_TENANT)
        second_other = (await submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
        claimed, reads_behind_many = await _claim_reads(hot_state, plane, saturated)
        assert claimed == second_other  # the cancelled run's index entry was dropped, not claimed
        # + the cancelled run's stale entry, and the corrected head read again: 404 runs ahead.
        assert reads_behind_few <= 2 and reads_behind_many <= reads_behind_few + 2

        # Nothing passed over: strict queue order across both groups.
        order = [few[0], few[1]]
        assert [(await _claim_reads(hot_state, plane, frozenset()))[0] for _ in order] == order
        assert len(many) == 400
    finally:
        await plane.stop()


async def test_a_queue_written_before_the_group_index_is_indexed_once_by_the_next_claim(
    hot_state: HotState,
) -> None:
    hot_state.partitions = 1  # the index of one partition, holding both tenants' runs
    plane = control_plane(hot_state, scale_out_enabled=False)
    keys = plane.parts.queue.keys.partition(0)
    try:
        ids = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, tenant)).shared_run_id
            for tenant in (TENANT_A, DEFAULT_TENANT, TENANT_A)
        ]
        await hot_state.redis.delete(keys.pending_by_group, keys.group_heads, keys.pending_indexed)
        saturated = frozenset({admission_group(TENANT_A)})
        assert (await _claim_reads(hot_state, plane, saturated))[0] == ids[1]
        assert await hot_state.redis.exists(keys.pending_indexed) == 1
        assert [(await _claim_reads(hot_state, plane, frozenset()))[0] for _ in range(2)] == [ids[0], ids[2]]
        assert await plane.parts.queue.claim_next(PUMP) is None
    finally:
        await plane.stop()


async def test_cancelling_a_queued_shared_run_removes_it_before_any_identity_exists(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        cancelled = await plane.cancel(submitted.shared_run_id, DEFAULT_TENANT)
        drained = await plane.drain(10, DEFAULT_TENANT)
        status = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        assert cancelled.shared_status == SharedRunStatus.CANCELLED.value
        assert drained.attempted == 0
        assert status.shared_status == "Cancelled" and status.queue_status == "Cancelled"
        assert status.local_run_id is None and status.execution_id is None
        assert instance.local_runs() == []
    finally:
        await plane.stop()


async def test_direct_dispatch_assigns_the_run_at_submit_time(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    try:
        result = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        run = await plane.parts.runs.get(result.shared_run_id)
        assert result.status is SharedRunStatus.DISPATCHED and result.admission_decision == "AssignToInstance"
        assert run is not None and run.local_run_id == result.local_run_id
        assert await plane.parts.queue.item(result.shared_run_id) is None
        final = await instance.wait_for_run(result.local_run_id or "", timeout=10)
        assert final.status is LocalRunStatus.COMPLETED
    finally:
        await plane.stop()


async def test_direct_dispatch_queues_globally_when_visible_capacity_is_busy(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    await instance.pause_queue(reason="busy")
    try:
        result = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        item = await plane.parts.queue.item(result.shared_run_id)
        assert (
            result.status is SharedRunStatus.QUEUED_GLOBALLY and result.admission_decision == "QueueGlobally"
        )
        assert item is not None and item.status is QueueItemStatus.PENDING
    finally:
        await plane.stop()


async def test_direct_dispatch_without_capacity_or_scale_out_is_rejected(hot_state: HotState) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    result = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
    run = await plane.parts.runs.get(result.shared_run_id)
    assert result.status is SharedRunStatus.REJECTED and result.admission_decision == "Reject"
    assert run is not None and run.status is SharedRunStatus.REJECTED and run.failure_reason


async def test_drain_reports_progress_per_attempt_and_lists_only_the_callers_runs(
    hot_state: HotState,
) -> None:
    """The drain dispatches the other tenant's run too, but reports (progress, counts) only the
    caller's (issue 13.11: counts of another tenant's runs are not the caller's to see)."""
    plane = control_plane(hot_state)
    await start_instance(plane, worker_count=10, max_local_workers_per_execution=1, max_concurrent_runs=10)
    progress: list[tuple[int, int, str]] = []

    async def record(done: int, total: int, message: str) -> None:
        progress.append((done, total, message))

    try:
        mine = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        theirs = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, OTHER_SHARED_TENANT)
        drained = await plane.drain(5, DEFAULT_TENANT, record)
        other = await plane.parts.runs.get(theirs.shared_run_id)
        assert other is not None and other.status is not SharedRunStatus.QUEUED_GLOBALLY
        assert (drained.attempted, drained.dispatched, drained.pending_after) == (1, 1, 0)
        assert [run.shared_run_id for run in drained.runs] == [mine.shared_run_id]
        assert [(done, total) for done, total, _ in progress] == [(1, 5)]
        assert mine.shared_run_id in progress[0][2]
    finally:
        await plane.stop()


async def test_a_tenants_pending_count_is_its_own_alone_in_a_partition_or_sharing_it(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    queue = plane.parts.queue
    try:
        mine = [await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT) for _ in range(2)]
        assert await queue.pending_count_of_tenant(DEFAULT_TENANT.tenant_id) == 2
        assert await queue.pending_count_of_tenant(OTHER_SHARED_TENANT.tenant_id) == 0
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, OTHER_SHARED_TENANT)
        # Alone in its partition or sharing it with the other tenant (a single Redis: one
        # partition), each tenant counts its own Pending runs only.
        assert await queue.pending_count_of_tenant(DEFAULT_TENANT.tenant_id) == 2
        assert await queue.pending_count_of_tenant(OTHER_SHARED_TENANT.tenant_id) == 1
        await plane.cancel(mine[0].shared_run_id, DEFAULT_TENANT, reason="test")
        assert await queue.pending_count_of_tenant(DEFAULT_TENANT.tenant_id) == 1
    finally:
        await plane.stop()


async def test_direct_dispatch_falls_back_to_the_global_queue_when_delivery_fails(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane)
    plane.parts.providers.add(FailingProvider(plane, fail_times=1))
    try:
        result = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        item = await plane.parts.queue.item(result.shared_run_id)
        assert result.status is SharedRunStatus.QUEUED_GLOBALLY and result.local_run_id is None
        assert "injected dispatch failure" in result.reason
        assert item is not None and item.status is QueueItemStatus.PENDING
    finally:
        await plane.stop()


async def test_one_cycle_reads_the_registry_once_and_still_spreads_runs_over_instances(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    first = await start_instance(plane, n=1)
    second = await start_instance(plane, n=2)
    try:
        for _ in range(2):
            await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        before = await command_calls(hot_state, "cmdstat_smembers")
        result = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=10, pump=PUMP))
        listings = await command_calls(hot_state, "cmdstat_smembers") - before
        assigned = {a.assigned_runtime_instance_id for a in result.dispatched}
        assert len(result.dispatched) == 2 and listings == 1
        assert assigned == {first.runtime_instance_id, second.runtime_instance_id}
    finally:
        await plane.stop()


async def test_a_slot_freed_by_an_in_process_run_wakes_the_background_pump(hot_state: HotState) -> None:
    """The pump idles for a minute between empty cycles; an instance with one run slot still
    runs three queued runs one after the other at once: each run's end wakes the pump."""
    plane = control_plane(hot_state, background_pump=True, pump_idle_interval_ms=60_000)
    await start_instance(plane, max_concurrent_runs=1)
    try:
        await plane.start()
        ids = [
            (await plane.submit(ONE_STEP, {"n": n}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
            for n in range(3)
        ]

        async def all_completed() -> bool:
            records = [await plane.parts.index.get_by_shared(shared_run_id) for shared_run_id in ids]
            return all(r is not None and r.status is LocalRunStatus.COMPLETED for r in records)

        await wait_until(all_completed, timeout=20, interval=0.05)
    finally:
        await plane.stop()


async def test_a_queue_first_submit_whose_script_the_client_sent_twice_is_one_queued_run(
    hot_state: HotState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py re-sends a command whose connection failed mid-reply (the script already ran):
    the second run of the creating script finds the run it made, and the submit still succeeds."""
    plane = control_plane(hot_state)
    queue = plane.parts.controller.queue
    send = queue.enqueue_new

    async def sent_twice(
        record: SharedRunRecord,
        idempotency: IdempotencyKey | None = None,
        rate_cells: Sequence[GcraCell] = (),
    ) -> QueueTransition:
        await send(record, idempotency, rate_cells)  # its reply was lost
        return await send(record, idempotency, rate_cells)

    monkeypatch.setattr(queue, "enqueue_new", sent_twice)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        assert submitted.status is SharedRunStatus.QUEUED_GLOBALLY and not submitted.deduplicated
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert item is not None and item.status is QueueItemStatus.PENDING
        assert await plane.parts.queue.pending_count() == 1
    finally:
        await plane.stop()
