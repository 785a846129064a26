"""The control plane's cluster gauges, read from a real redis-server at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.observability import MetricsExposition, ObservabilitySettings
from runtime_core.queueing import SubmitMode
from tests.integration.control_plane_support import DEFAULT_TENANT, ONE_STEP, control_plane, start_instance

GLOBEX = ExecutionContextSnapshot(user_id="gus", tenant_id="globex", context_key="test-globex")


async def _scrape(hot_state: HotState, tenant_labels: bool) -> CollectorRegistry:
    plane = control_plane(hot_state)
    await start_instance(plane)
    try:
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, GLOBEX)
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, GLOBEX)
        await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, GLOBEX)
        registry = CollectorRegistry()
        exposition = MetricsExposition(registry)
        settings = ObservabilitySettings(metrics_tenant_labels=tenant_labels)
        exposition.add_gauges(plane.gauges(settings))
        await exposition.render()
        return registry
    finally:
        await plane.stop()


async def test_queue_depth_and_shared_runs_are_totals_without_tenant_labels(hot_state: HotState) -> None:
    registry = await _scrape(hot_state, tenant_labels=False)
    assert registry.get_sample_value("mcprt_queue_depth", {}) == 3
    assert registry.get_sample_value("mcprt_shared_runs", {"status": "QueuedGlobally"}) == 3
    assert registry.get_sample_value("mcprt_shared_runs", {"status": "Dispatched"}) == 1
    registered = {"health": "Healthy", "live": "true"}
    assert registry.get_sample_value("mcprt_registered_instances", registered) == 1


async def test_queue_depth_and_shared_runs_are_per_tenant_when_enabled(hot_state: HotState) -> None:
    registry = await _scrape(hot_state, tenant_labels=True)
    assert registry.get_sample_value("mcprt_queue_depth", {"tenant": DEFAULT_TENANT.tenant_id}) == 1
    assert registry.get_sample_value("mcprt_queue_depth", {"tenant": "globex"}) == 2
    assert registry.get_sample_value("mcprt_queue_depth", {}) is None
    globex_dispatched = {"status": "Dispatched", "tenant": "globex"}
    assert registry.get_sample_value("mcprt_shared_runs", globex_dispatched) == 1
