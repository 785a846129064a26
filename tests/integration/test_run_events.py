"""Run events (issue 15 item 4, runtime side): every status change of a run is published on
Redis pub/sub by whoever made it (control plane journal, engine observer, runtime instance);
the end of a run and a wait for input also go to the durable run-event stream with a
deterministic id. Runs on a single Redis and on a Redis Cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, TenantsFile
from runtime_core.dag import CompositeObserver, EngineEvent
from runtime_core.events import (
    EVENT_FIELD,
    RunEvent,
    RunEventKeys,
    RunEventObserver,
    RunEventPublisher,
    RunEventSubscriber,
    RunEventType,
    terminal_event_id,
)
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import InstanceHealth, LocalRunStatus
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.steps import HumanApprovalExecutor
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    EXAMPLE_TENANTS,
    evented_control_plane,
    make_engine,
    start_instance,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")

CHAIN = parse_pipeline(
    {
        "name": "chain",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
            {"name": "c", "stepKey": "test.noop", "dependsOn": ["b"]},
        ],
    }
)
APPROVAL = parse_pipeline(
    {
        "name": "approval",
        "steps": [{"name": "ask", "stepKey": "human.approval", "config": {"waitingKey": "ok"}}],
    }
)
OTHER = ExecutionContextSnapshot(user_id="zed", tenant_id="tenant-events-other", context_key="test-other")


@dataclass
class Heard:
    events: list[RunEvent] = field(default_factory=list)

    def of(self, shared_run_id: str) -> list[RunEvent]:
        return [event for event in self.events if event.shared_run_id == shared_run_id]

    def types(self, shared_run_id: str) -> list[RunEventType]:
        return [event.type for event in self.of(shared_run_id)]

    async def until(self, shared_run_id: str, event_type: RunEventType) -> RunEvent:
        async def heard() -> bool:
            return event_type in self.types(shared_run_id)

        await wait_until(heard, timeout=20)
        return next(event for event in self.of(shared_run_id) if event.type is event_type)


async def open_stream(hot_state: HotState) -> None:
    """What a starting webhook service does: the durable stream exists from now on."""
    await hot_state.redis.xgroup_create(RunEventKeys(hot_state).stream, "test", id="$", mkstream=True)


@dataclass
class Rig:
    plane: ControlPlane
    publisher: RunEventPublisher
    heard: Heard


@pytest.fixture
async def rig(hot_state: HotState) -> AsyncIterator[Rig]:
    plane, publisher = evented_control_plane(hot_state, HumanApprovalExecutor(), host="eventhost")
    subscriber = RunEventSubscriber(hot_state)
    heard = Heard()
    subscriber.listen(heard.events.append)
    await subscriber.wait_subscribed()
    await start_instance(plane)
    try:
        yield Rig(plane, publisher, heard)
    finally:
        await plane.stop()
        await publisher.aclose()
        await subscriber.aclose()


async def test_a_runs_status_changes_reach_a_subscriber_in_order_ending_once_it_is_done(rig: Rig) -> None:
    submitted = await rig.plane.submit(CHAIN, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    run_id = submitted.shared_run_id
    await rig.plane.drain(10, DEFAULT_TENANT)
    end = await rig.heard.until(run_id, RunEventType.COMPLETED)
    view = await rig.plane.run_status(run_id, DEFAULT_TENANT)
    assert view.local_status == "Completed" and view.execution_status == "Completed"
    types = rig.heard.types(run_id)
    status_changes = [t for t in types if t is not RunEventType.STEP_COMPLETED]
    # The instance may start (even finish) the execution before the dispatcher records the
    # dispatch: it marks a run Dispatched only once the provider accepted it.
    assert status_changes[:2] == [RunEventType.SUBMITTED, RunEventType.QUEUED]
    assert sorted(status_changes[2:]) == sorted(
        [RunEventType.DISPATCHED, RunEventType.STARTED, RunEventType.COMPLETED]
    )
    assert types.index(RunEventType.STARTED) < types.index(RunEventType.STEP_COMPLETED)
    assert len(types) - 1 - types[::-1].index(RunEventType.STEP_COMPLETED) < types.index(
        RunEventType.COMPLETED
    )
    steps = [event.step for event in rig.heard.of(run_id) if event.type is RunEventType.STEP_COMPLETED]
    assert steps == ["a", "b", "c"]
    assert {event.tenant_id for event in rig.heard.of(run_id)} == {DEFAULT_TENANT.tenant_id}
    assert end.local_run_id == view.local_run_id and end.execution_id == view.execution_id


async def test_without_a_webhook_service_no_durable_event_accumulates(rig: Rig, hot_state: HotState) -> None:
    submitted = await rig.plane.submit(CHAIN, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
    await rig.heard.until(submitted.shared_run_id, RunEventType.COMPLETED)
    assert not await hot_state.redis.exists(RunEventKeys(hot_state).stream)


async def test_the_end_of_a_run_is_in_the_durable_stream_under_a_deterministic_id(
    rig: Rig, hot_state: HotState
) -> None:
    await open_stream(hot_state)
    submitted = await rig.plane.submit(CHAIN, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
    end = await rig.heard.until(submitted.shared_run_id, RunEventType.COMPLETED)
    assert end.event_id == terminal_event_id(RunEventType.COMPLETED, submitted.shared_run_id, None)
    entries = await hot_state.redis.xrange(RunEventKeys(hot_state).stream)
    durable = [RunEvent.model_validate_json(fields[EVENT_FIELD]) for _, fields in entries]
    ours = [event for event in durable if event.shared_run_id == submitted.shared_run_id]
    assert [event.type for event in ours] == [RunEventType.COMPLETED]
    assert ours[0].event_id == end.event_id


async def test_a_run_waiting_for_input_is_announced_with_its_waiting_key(
    rig: Rig, hot_state: HotState
) -> None:
    await open_stream(hot_state)
    submitted = await rig.plane.submit(APPROVAL, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
    waiting = await rig.heard.until(submitted.shared_run_id, RunEventType.WAITING_FOR_INPUT)
    assert waiting.waiting_key == "ok" and waiting.step == "ask" and waiting.status == "WaitingForInput"
    entries = await hot_state.redis.xrange(RunEventKeys(hot_state).stream)
    assert waiting.event_id in {RunEvent.model_validate_json(f[EVENT_FIELD]).event_id for _, f in entries}
    await rig.plane.cancel(submitted.shared_run_id, DEFAULT_TENANT)
    await rig.heard.until(submitted.shared_run_id, RunEventType.CANCELLED)


async def test_a_run_cancelled_before_dispatch_ends_with_a_cancelled_event(rig: Rig) -> None:
    submitted = await rig.plane.submit(CHAIN, {}, SubmitMode.QUEUE_FIRST, OTHER)
    await rig.plane.cancel(submitted.shared_run_id, OTHER)
    end = await rig.heard.until(submitted.shared_run_id, RunEventType.CANCELLED)
    assert end.tenant_id == OTHER.tenant_id and end.local_run_id is None and end.terminal


# A process killed between a run's end and the end event: recovery announces it.


class StallingPublisher(RunEventPublisher):
    """Once armed, the first end of a run it is asked to publish never leaves: its process dies there."""

    def __init__(self, hot_state: HotState) -> None:
        super().__init__(hot_state)
        self.armed = False
        self.stalled = asyncio.Event()

    async def publish(self, event: RunEvent) -> None:
        if self.armed and event.terminal and not self.stalled.is_set():
            self.stalled.set()
            await asyncio.Event().wait()  # until the crash cancels it
        await super().publish(event)


class StallOnFinalized:
    """Once armed, an engine observer whose process dies when the execution finalized, before
    its run closed."""

    def __init__(self) -> None:
        self.armed = False
        self.stalled = asyncio.Event()

    async def on_event(self, event: EngineEvent) -> None:
        if self.armed and event.name == "execution.finalized":
            self.stalled.set()
            await asyncio.Event().wait()  # until the crash cancels it


@dataclass
class Crashable:
    plane: ControlPlane
    publisher: StallingPublisher
    finalized: StallOnFinalized


@pytest.fixture
async def crashable(hot_state: HotState) -> AsyncIterator[Crashable]:
    """A control plane with events and a short health window; the stream exists."""
    await open_stream(hot_state)
    engine, control = make_engine(hot_state)
    publisher, finalized = StallingPublisher(hot_state), StallOnFinalized()
    engine.observer = CompositeObserver(RunEventObserver(publisher, engine.store), finalized)
    settings = ControlPlaneSettings(
        host="crashhost",
        local_instances=0,
        background_pump=False,
        heartbeat_interval_ms=50,
        health_window_ms=300,
    )
    plane = ControlPlane.build(
        hot_state,
        engine,
        control,
        settings,
        tenants=TenantsFile.read(EXAMPLE_TENANTS).catalog,
        events=publisher,
    )
    try:
        yield Crashable(plane, publisher, finalized)
    finally:
        await plane.stop()
        await publisher.aclose()


async def _killed_at(crashable: Crashable, stalled: asyncio.Event) -> str:
    """Run CHAIN on an instance that is killed where `stalled` is set; recover it."""
    plane = crashable.plane
    instance = await start_instance(plane, heartbeat_interval_ms=50)
    submitted = await plane.submit(CHAIN, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    await plane.drain(10, DEFAULT_TENANT)
    await asyncio.wait_for(stalled.wait(), timeout=20)
    await instance.stop(unregister=False)  # what SIGKILL leaves: no heartbeat, Redis as it was
    registry_key = plane.parts.registry.keys(instance.runtime_instance_id).registry

    async def unsafe() -> bool:
        await plane.parts.health.reconcile_once()
        return await plane.parts.hot_state.redis.hget(registry_key, "health") == InstanceHealth.UNSAFE

    await wait_until(unsafe, timeout=10)
    await plane.parts.recovery.reconcile_once()
    return submitted.shared_run_id


async def _durable_ends(hot_state: HotState, shared_run_id: str) -> list[RunEvent]:
    entries = await hot_state.redis.xrange(RunEventKeys(hot_state).stream)
    durable = [RunEvent.model_validate_json(fields[EVENT_FIELD]) for _, fields in entries]
    return [event for event in durable if event.shared_run_id == shared_run_id and event.terminal]


async def test_a_run_closed_by_a_process_killed_before_its_end_event_left_is_announced_by_recovery(
    crashable: Crashable, hot_state: HotState
) -> None:
    crashable.publisher.armed = True
    shared_run_id = await _killed_at(crashable, crashable.publisher.stalled)

    [end] = await _durable_ends(hot_state, shared_run_id)
    assert end.type is RunEventType.COMPLETED
    assert end.event_id == terminal_event_id(RunEventType.COMPLETED, shared_run_id, None)
    record = await crashable.plane.parts.index.get_by_shared(shared_run_id)
    assert record is not None and record.status is LocalRunStatus.COMPLETED
    assigned = await crashable.plane.parts.index.assigned_to(record.runtime_instance_id)
    assert record.local_run_id not in {r.local_run_id for r in assigned}


async def test_a_run_whose_execution_ended_in_a_process_killed_before_it_closed_the_run_is_announced(
    crashable: Crashable, hot_state: HotState
) -> None:
    crashable.finalized.armed = True
    shared_run_id = await _killed_at(crashable, crashable.finalized.stalled)

    [end] = await _durable_ends(hot_state, shared_run_id)
    assert end.type is RunEventType.COMPLETED and end.execution_id is not None
    record = await crashable.plane.parts.index.get_by_shared(shared_run_id)
    assert record is not None and record.status is LocalRunStatus.COMPLETED


async def test_a_listener_naming_its_event_types_hears_only_those(hot_state: HotState) -> None:
    publisher, subscriber = RunEventPublisher(hot_state), RunEventSubscriber(hot_state)
    rare, everything = Heard(), Heard()
    stop_rare = subscriber.listen(rare.events.append, types=(RunEventType.ASSISTANCE_WANTED,))
    await subscriber.wait_subscribed()

    def event(event_type: RunEventType, execution_id: str) -> RunEvent:
        return RunEvent(
            event_id=f"ev-{execution_id}", type=event_type, tenant_id="t", execution_id=execution_id
        )

    try:
        for n in range(3):  # step progress streaming past, then the one it waits for
            publisher.emit(event(RunEventType.STEP_COMPLETED, f"e{n}"))
        publisher.emit(event(RunEventType.ASSISTANCE_WANTED, "wanted"))
        await publisher.flush()

        async def heard_the_rare_one() -> bool:
            return bool(rare.events)

        await wait_until(heard_the_rare_one)
        stop_everything = subscriber.listen(everything.events.append)  # now every event is decoded
        stop_rare()
        publisher.emit(event(RunEventType.STEP_COMPLETED, "later"))
        publisher.emit(event(RunEventType.ASSISTANCE_WANTED, "later-wanted"))
        await publisher.flush()

        async def heard_both_later() -> bool:
            return len(everything.events) == 2

        await wait_until(heard_both_later)
        stop_everything()
    finally:
        await publisher.aclose()
        await subscriber.aclose()
    assert [e.execution_id for e in rare.events] == ["wanted"]
    assert [e.execution_id for e in everything.events] == ["later", "later-wanted"]
