"""Issue 17.6: the runs of one claim are dispatched together and share round trips.

A pump dispatches the runs it claimed in one call concurrently; an instance accepts them
concurrently (never overfilling its local queue, never queueing one dispatch attempt twice)
and publishes its capacity once for the accepts that arrived together (group commit); run
events that must leave now leave together; independent Redis calls made at the same time
(scripts of any kind, plain command groups) share one pipelined round trip.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

from runtime_core.control_plane import run_is_done
from runtime_core.errors import ConflictError
from runtime_core.events import EVENT_FIELD, RunEvent, RunEventPublisher, RunEventSubscriber, RunEventType
from runtime_core.hot_state import HotState
from runtime_core.instances import DISPATCH_ATTEMPT_KEY, LocalRunRequest, Reservation, RuntimeInstance
from runtime_core.queueing import PumpIdentity, PumpRequest
from tests.helpers import command_calls, wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    GATED,
    ONE_STEP,
    GateExecutor,
    control_plane,
    standalone_instance,
    start_instance,
)
from tests.integration.lifecycle_support import submit_queued

pytestmark = pytest.mark.redis_kinds("single", "cluster")

PUMP = PumpIdentity(pump_runtime_instance_id="together-pump", pump_worker_id="w1")


def attempt(attempt_id: str) -> LocalRunRequest:
    return LocalRunRequest(
        pipeline=ONE_STEP,
        input={},
        snapshot=DEFAULT_TENANT,
        shared_run_id=f"srun_together_{attempt_id}",
        attributes={DISPATCH_ATTEMPT_KEY: attempt_id},
    )


async def paused_instance(hot_state: HotState, **settings: Any) -> RuntimeInstance:
    instance = await standalone_instance(control_plane(hot_state), **settings).start()
    await instance.pause_queue(reason="keep the runs queued")
    return instance


def counted_publications(instance: RuntimeInstance) -> list[int]:
    """One entry per capacity publication the instance makes from now on."""
    publications: list[int] = []
    registry = instance.deps.registry
    publish = registry.heartbeat

    async def counted(*args: Any, **kwargs: Any) -> Any:
        publications.append(1)
        return await publish(*args, **kwargs)

    registry.heartbeat = counted  # type: ignore[method-assign]
    return publications


async def test_publications_asked_for_at_once_are_one_publication(hot_state: HotState) -> None:
    instance = await paused_instance(hot_state, heartbeat_interval_ms=60_000)
    publications = counted_publications(instance)
    try:
        await asyncio.gather(*(instance.publish() for _ in range(8)))
        # One publication describes the instance for all of them (plus, at most, one that a
        # heartbeat of the instance's own loop had on its way).
        assert 1 <= len(publications) <= 2
    finally:
        await instance.stop()


async def test_runs_accepted_at_once_share_capacity_publications(hot_state: HotState) -> None:
    instance = await paused_instance(hot_state, heartbeat_interval_ms=60_000)
    publications = counted_publications(instance)
    try:
        views = await asyncio.gather(*(instance.enqueue(attempt(f"att-{n}")) for n in range(8)))
        assert len({view.local_run_id for view in views}) == 8
        # Accepts finishing while a publication is on its way share the next one.
        assert 1 <= len(publications) < 8
        entries = await instance.deps.registry.entries()
        [entry] = [e for e in entries if e.runtime_instance_id == instance.runtime_instance_id]
        assert entry.capacity.queued == 8 and entry.reserved_slots == 0
    finally:
        await instance.stop()


async def test_runs_accepted_at_once_never_overfill_the_local_queue(hot_state: HotState) -> None:
    instance = await paused_instance(hot_state, local_queue_capacity=3)
    try:
        outcomes = await asyncio.gather(
            *(instance.enqueue(attempt(f"att-{n}")) for n in range(5)), return_exceptions=True
        )
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(refused) == 2
        assert all(isinstance(o, ConflictError) and "is full" in o.message for o in refused)
        assert instance.capacity().queued == 3
    finally:
        await instance.stop()


async def test_one_dispatch_attempt_arriving_twice_at_once_queues_one_run(hot_state: HotState) -> None:
    instance = await paused_instance(hot_state)
    try:
        first, again = await asyncio.gather(
            instance.enqueue(attempt("att-1")), instance.enqueue(attempt("att-1"))
        )
        assert first.local_run_id == again.local_run_id
        assert [view.local_run_id for view in instance.local_runs()] == [first.local_run_id]
    finally:
        await instance.stop()


async def test_a_pump_dispatches_a_claimed_batch_together_in_claim_order(hot_state: HotState) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    await start_instance(plane, worker_count=4, max_concurrent_runs=8)
    try:
        runs = [await submit_queued(plane, ONE_STEP, DEFAULT_TENANT) for _ in range(6)]
        result = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=10, pump=PUMP))
        assert [attempt.shared_run_id for attempt in result.dispatched] == runs
        assert len({attempt.local_run_id for attempt in result.dispatched}) == 6

        async def all_completed() -> bool:
            views = [await plane.run_status(run, DEFAULT_TENANT) for run in runs]
            return all(run_is_done(view) and view.execution_status == "Completed" for view in views)

        await wait_until(all_completed, timeout=30)
    finally:
        await plane.stop()


async def test_a_batch_spreads_over_the_instances_without_a_refused_reservation(hot_state: HotState) -> None:
    """The runs of one batch are admitted against the slots the batch's earlier runs took,
    so they spread over the instances (before, every run of a batch ranked the same instance
    first, and those past its free slots were refused there and reserved again elsewhere)."""
    gate = GateExecutor()
    plane = control_plane(hot_state, gate, scale_out_enabled=False)
    instances = [await start_instance(plane, n=n, worker_count=3, max_concurrent_runs=3) for n in (1, 2)]
    reservations = plane.parts.dispatcher.delivery.reservations
    reserve, refused = reservations.reserve, []

    async def recorded(runtime_instance_id: str, shared_run_id: str, ttl_ms: int) -> Reservation:
        reservation = await reserve(runtime_instance_id, shared_run_id, ttl_ms)
        refused.extend([] if reservation.outcome.held else [runtime_instance_id])
        return reservation

    reservations.reserve = recorded  # type: ignore[method-assign]
    try:
        runs = [await submit_queued(plane, GATED, DEFAULT_TENANT) for _ in range(6)]
        result = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=10, pump=PUMP))
        assert sorted(attempt.shared_run_id or "" for attempt in result.dispatched) == sorted(runs)
        placed = Counter(attempt.assigned_runtime_instance_id for attempt in result.dispatched)
        assert placed == {instance.runtime_instance_id: 3 for instance in instances}
        assert refused == []
    finally:
        gate.release()
        await plane.stop()


async def test_a_pump_that_dispatched_claims_a_batch_from_its_next_cycles_first_claim(
    hot_state: HotState,
) -> None:
    """A cycle's first claim takes one run (a tenant without capacity costs one claim, not a
    batch), unless an earlier cycle dispatched and none since met a group without capacity
    (an idle cycle in between changes nothing): a pump that keeps dispatching does not pay
    one lone dispatch per cycle."""
    plane = control_plane(hot_state, scale_out_enabled=False)
    await start_instance(plane, worker_count=4, max_concurrent_runs=16)
    queue = plane.parts.queue
    claim, limits = queue.claim_batch, []

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        limits.append(kwargs["limit"])
        return await claim(*args, **kwargs)

    queue.claim_batch = recorded  # type: ignore[method-assign]
    first_claims = []
    try:
        for _ in range(3):
            runs = [await submit_queued(plane, ONE_STEP, DEFAULT_TENANT) for _ in range(4)]
            limits.clear()
            result = await plane.parts.pump.pump(PumpRequest(max_dispatch_count=10, pump=PUMP))
            assert sorted(attempt.shared_run_id or "" for attempt in result.dispatched) == sorted(runs)
            first_claims.append(limits[0])
            assert not (await plane.parts.pump.pump(PumpRequest(max_dispatch_count=10, pump=PUMP))).attempts
        assert first_claims == [1, 10, 10]
    finally:
        await plane.stop()


async def test_events_published_at_once_leave_together_and_in_order(hot_state: HotState) -> None:
    publisher = RunEventPublisher(hot_state)
    await hot_state.redis.xadd(publisher.keys.stream, {EVENT_FIELD: "{}"})  # as the webhook service does
    subscriber = RunEventSubscriber(hot_state)
    heard: list[RunEvent] = []
    subscriber.listen(heard.append)
    await subscriber.wait_subscribed()
    events = [
        RunEvent(event_id=f"evt_together_{n}", type=RunEventType.COMPLETED, tenant_id="tenant-a")
        for n in range(6)
    ]
    try:
        calls_before = await command_calls(hot_state, "cmdstat_evalsha")
        await asyncio.gather(*(publisher.publish(event) for event in events))
        assert await command_calls(hot_state, "cmdstat_evalsha") - calls_before <= 2
        entries = await hot_state.redis.xrange(publisher.keys.stream)
        appended = [json.loads(fields[EVENT_FIELD]).get("event_id") for _, fields in entries[1:]]
        assert appended == [event.event_id for event in events]

        async def all_heard() -> bool:
            return len(heard) == len(events)

        await wait_until(all_heard)
        assert [event.event_id for event in heard] == [event.event_id for event in events]
    finally:
        await subscriber.aclose()
        await publisher.aclose()
