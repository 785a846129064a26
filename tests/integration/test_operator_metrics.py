"""Metrics an operator alerts on (issue 29.2), read from a real redis-server and real instances.

A parked run (waiting for human input, or paused) holds its run slot but is not running: the
capacity gauges count it apart. The queue's oldest Pending run has an age per admission group.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import HotState
from runtime_core.instances import LocalRunRequest, LocalRunStatus, RuntimeInstance
from runtime_core.observability import MetricsExposition, ObservabilitySettings, capacity_gauges
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    GATED,
    ONE_STEP,
    GateExecutor,
    control_plane,
    start_instance,
)

APPROVAL = parse_pipeline(
    {
        "name": "approval",
        "steps": [{"name": "ask", "stepKey": "human.approval", "config": {"waitingKey": "go"}}],
    }
)


def _true(condition: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def holds() -> bool:
        return condition()

    return holds


async def _scrape(*gauges: object) -> CollectorRegistry:
    registry = CollectorRegistry()
    exposition = MetricsExposition(registry)
    exposition.add_gauges(*gauges)  # type: ignore[arg-type]
    await exposition.render()
    return registry


async def _parked_as(plane: ControlPlane, instance: RuntimeInstance, local_run_id: str, status: str) -> str:
    async def parked() -> bool:
        execution_id = instance.run_view(local_run_id).execution_id
        return execution_id is not None and (
            await plane.parts.dag_store.control_status(execution_id) == status
            and instance.capacity().waiting_for_input + instance.capacity().paused_runs > 0
        )

    await wait_until(parked, timeout=10)
    execution_id = instance.run_view(local_run_id).execution_id
    assert execution_id is not None
    return execution_id


async def test_runs_waiting_for_input_and_paused_runs_are_not_counted_as_running(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await start_instance(plane, worker_count=4, max_concurrent_runs=4)
    settings = ObservabilitySettings(metrics_cache_s=0)
    gauges = capacity_gauges(lambda: [instance.capacity()], settings)
    try:
        asking = await instance.enqueue(LocalRunRequest(pipeline=APPROVAL, input={}, snapshot=DEFAULT_TENANT))
        asking_execution = await _parked_as(plane, instance, asking.local_run_id, "WaitingForInput")
        gated = await instance.enqueue(LocalRunRequest(pipeline=GATED, input={}, snapshot=DEFAULT_TENANT))
        await wait_until(_true(lambda: gate.started == 1), timeout=10)
        gated_execution = instance.run_view(gated.local_run_id).execution_id
        assert gated_execution is not None

        running = await _scrape(gauges)
        assert running.get_sample_value("mcprt_executions_running", {}) == 1  # the gated run
        assert running.get_sample_value("mcprt_executions_waiting_for_input", {}) == 1
        assert running.get_sample_value("mcprt_executions_paused", {}) == 0

        await plane.parts.canceller.pause(gated_execution, DEFAULT_TENANT)
        gate.release()  # its step ends; the run parks Paused at its gate
        await wait_until(_true(lambda: instance.capacity().paused_runs == 1), timeout=10)
        parked = await _scrape(gauges)
        assert parked.get_sample_value("mcprt_executions_running", {}) == 0
        assert parked.get_sample_value("mcprt_executions_waiting_for_input", {}) == 1
        assert parked.get_sample_value("mcprt_executions_paused", {}) == 1
        labels = {"runtime_instance_id": instance.settings.runtime_instance_id}
        assert parked.get_sample_value("mcprt_instance_runs", {**labels, "state": "paused"}) == 1
        assert parked.get_sample_value("mcprt_instance_runs", {**labels, "state": "waiting_for_input"}) == 1
        assert parked.get_sample_value("mcprt_instance_runs", {**labels, "state": "running"}) == 0

        await plane.parts.canceller.resume(gated_execution, DEFAULT_TENANT)
        await plane.parts.canceller.submit_input(asking_execution, "go", {"approved": True}, DEFAULT_TENANT)
        for run in (gated, asking):
            assert (
                await instance.wait_for_run(run.local_run_id, timeout=10)
            ).status is LocalRunStatus.COMPLETED
        done = await _scrape(gauges)
        assert done.get_sample_value("mcprt_executions_waiting_for_input", {}) == 0
        assert done.get_sample_value("mcprt_executions_paused", {}) == 0
    finally:
        gate.release()
        await plane.stop()


async def test_the_oldest_queued_run_has_an_age_per_admission_group(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    redis = hot_state.redis
    try:
        empty = await _scrape(plane.gauges(ObservabilitySettings(metrics_cache_s=0)))
        assert empty.get_sample_value("mcprt_queue_oldest_age_seconds", {}) == 0

        first = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        item = await plane.parts.queue.item(first.shared_run_id)
        assert item is not None
        seconds, micros = await redis.time()
        before_ms = int(seconds) * 1000 + int(micros) // 1000
        by_group = await _scrape(plane.gauges(ObservabilitySettings(metrics_tenant_labels=True)))
        seconds, micros = await redis.time()
        after_ms = int(seconds) * 1000 + int(micros) // 1000

        labels = {"tenant": DEFAULT_TENANT.tenant_id, "tenant_group": ""}
        age = by_group.get_sample_value("mcprt_queue_oldest_age_seconds", labels)
        assert age is not None
        assert (before_ms - item.enqueued_at_ms) / 1000 <= age <= (after_ms - item.enqueued_at_ms) / 1000
        total = await _scrape(plane.gauges(ObservabilitySettings()))
        assert (total.get_sample_value("mcprt_queue_oldest_age_seconds", {}) or 0) >= age
        assert total.get_sample_value("mcprt_queue_depth", {}) == 2
    finally:
        await plane.stop()
