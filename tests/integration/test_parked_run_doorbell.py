"""Issue 17.6: a parked run waits on a notification, not on polling its status.

A run paused or waiting for input holds its run slot but re-reads its control state only
rarely; the resume / input / cancel that unparks it is published as a run event
(`run.resume_requested`, `run.input_submitted`, `run.cancel_requested`) and rings the
instance's doorbell, which wakes that run at once. The instances here re-read their control
state only once a minute, so a run that continues within seconds was woken by the ring.
Runs on a single Redis and on a Redis Cluster (pub/sub across the cluster's nodes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.events import RunEventSubscriber
from runtime_core.hot_state import HotState
from runtime_core.instances import (
    LocalRunRequest,
    LocalRunStatus,
    RuntimeInstance,
    RuntimeInstanceSettings,
    UnparkDoorbell,
    local_instance_id,
)
from runtime_core.pipeline import parse_pipeline
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, evented_control_plane

pytestmark = pytest.mark.redis_kinds("single", "cluster")

APPROVAL = parse_pipeline(
    {
        "name": "approval",
        "steps": [
            {"name": "ask", "stepKey": "human.approval", "config": {"waitingKey": "go"}},
            {"name": "after", "stepKey": "test.noop", "dependsOn": ["ask"]},
        ],
    }
)
# Far longer than any wait below: a parked run that continues was woken by the doorbell.
MINUTE_S = 60.0


@pytest.fixture
async def parked_world(hot_state: HotState) -> AsyncIterator[tuple[ControlPlane, RuntimeInstance]]:
    plane, _ = evented_control_plane(hot_state, host="doorbell")
    subscriber = RunEventSubscriber(hot_state)
    doorbell = UnparkDoorbell(subscriber, first_wait_s=MINUTE_S, longest_wait_s=MINUTE_S)
    deps = dataclasses.replace(plane.parts.pool.deps, doorbell=doorbell)
    settings = RuntimeInstanceSettings(
        runtime_instance_id=local_instance_id("doorbell", "solo", 1), heartbeat_interval_ms=200
    )
    instance = await RuntimeInstance(settings, deps).start()
    try:
        yield plane, instance
    finally:
        await instance.stop()
        await doorbell.aclose()


async def _parked_and_listening(plane: ControlPlane, instance: RuntimeInstance) -> tuple[str, str]:
    """Enqueue the approval run; once it waits for input with its doorbell listening, its
    LocalRunId and ExecutionId."""
    view = await instance.enqueue(LocalRunRequest(pipeline=APPROVAL, input={}, snapshot=DEFAULT_TENANT))
    doorbell = instance.deps.doorbell

    async def listening() -> bool:
        execution_id = instance.run_view(view.local_run_id).execution_id
        if execution_id is None or not doorbell.is_watching(execution_id):
            return False
        return await plane.parts.dag_store.control_status(execution_id) == "WaitingForInput"

    await wait_until(listening, timeout=10)
    execution_id = instance.run_view(view.local_run_id).execution_id
    assert execution_id is not None
    await doorbell.wait_listening()
    return view.local_run_id, execution_id


async def test_input_for_a_parked_run_wakes_it_at_once(
    parked_world: tuple[ControlPlane, RuntimeInstance],
) -> None:
    plane, instance = parked_world
    local_run_id, execution_id = await _parked_and_listening(plane, instance)
    await plane.parts.canceller.submit_input(execution_id, "go", {"approved": True}, DEFAULT_TENANT)
    final = await instance.wait_for_run(local_run_id, timeout=10)
    assert final.status is LocalRunStatus.COMPLETED
    assert not instance.deps.doorbell.is_watching(execution_id)


async def test_cancelling_a_parked_run_ends_it_at_once(
    parked_world: tuple[ControlPlane, RuntimeInstance],
) -> None:
    plane, instance = parked_world
    local_run_id, execution_id = await _parked_and_listening(plane, instance)
    await plane.parts.canceller.cancel(execution_id, DEFAULT_TENANT, reason="no answer coming")
    final = await instance.wait_for_run(local_run_id, timeout=10)
    assert final.status is LocalRunStatus.CANCELLED


async def test_a_ring_for_another_execution_does_not_wake_a_parked_run(
    parked_world: tuple[ControlPlane, RuntimeInstance],
) -> None:
    plane, instance = parked_world
    first, first_execution = await _parked_and_listening(plane, instance)
    second, second_execution = await _parked_and_listening(plane, instance)
    await plane.parts.canceller.submit_input(second_execution, "go", {"approved": True}, DEFAULT_TENANT)
    assert (await instance.wait_for_run(second, timeout=10)).status is LocalRunStatus.COMPLETED
    assert instance.run_view(first).status is LocalRunStatus.RUNNING
    assert instance.deps.doorbell.is_watching(first_execution)
    await plane.parts.canceller.submit_input(first_execution, "go", {"approved": True}, DEFAULT_TENANT)
    assert (await instance.wait_for_run(first, timeout=10)).status is LocalRunStatus.COMPLETED


async def test_input_published_while_the_subscription_was_down_wakes_the_run_once_it_is_back(
    parked_world: tuple[ControlPlane, RuntimeInstance],
) -> None:
    """Pub/sub loses what it published while nobody listened: a subscription that becomes
    active again rings every watched run, which re-reads its control state."""
    plane, instance = parked_world
    local_run_id, execution_id = await _parked_and_listening(plane, instance)
    doorbell = instance.deps.doorbell
    await doorbell.aclose()
    await plane.parts.canceller.submit_input(execution_id, "go", {"approved": True}, DEFAULT_TENANT)
    assert plane.parts.events is not None
    await plane.parts.events.flush()  # published (emitted events wait 10 ms for company)
    assert instance.run_view(local_run_id).status is LocalRunStatus.RUNNING
    doorbell.listen()
    final = await instance.wait_for_run(local_run_id, timeout=10)
    assert final.status is LocalRunStatus.COMPLETED
