"""The tenant-scoped capacity read (`capacity.list`, the dashboard's capacity page): instances visible
to the tenant, their activity only where the tenant is alone, never another tenant's activity."""

from __future__ import annotations

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import HotState
from runtime_core.instances import IsolationMode
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    GATED,
    OTHER_SHARED_TENANT,
    TENANT_B,
    GateExecutor,
    control_plane,
    start_instance,
)

SIZE = {"worker_count": 4, "max_concurrent_runs": 3}


async def _running_on_shared_capacity(plane: ControlPlane) -> str:
    """Another shared tenant's run, held running on the shared instance."""
    run_id = (await plane.submit(GATED, {}, SubmitMode.QUEUE_FIRST, OTHER_SHARED_TENANT)).shared_run_id
    await plane.drain(5, OTHER_SHARED_TENANT)

    async def running() -> bool:
        views = await plane.list_instances(OTHER_SHARED_TENANT)
        return any(view.running == 1 for view in views)

    await wait_until(running, timeout=15)
    return run_id


async def test_shared_capacity_shows_its_size_but_not_other_tenants_activity(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    await start_instance(plane, **SIZE)
    try:
        await _running_on_shared_capacity(plane)
        [admin_view] = await plane.list_instances(DEFAULT_TENANT)
        [tenant_view] = await plane.tenant_capacity(DEFAULT_TENANT)
        assert admin_view.running == 1  # what instances.list shows an administrator
        assert (tenant_view.runtime_instance_id, tenant_view.worker_count) == (
            admin_view.runtime_instance_id,
            4,
        )
        assert (tenant_view.max_concurrent_runs, tenant_view.live, tenant_view.dedicated_to_tenant) == (
            3,
            True,
            False,
        )
        withheld = (
            tenant_view.active_workers,
            tenant_view.queued,
            tenant_view.running,
            tenant_view.available_run_slots,
            tenant_view.can_accept_run,
        )
        assert withheld == (None, None, None, None, None)
    finally:
        gate.release()
        await plane.stop()


async def test_capacity_dedicated_to_the_tenant_shows_its_activity_and_other_tenants_see_none_of_it(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    await start_instance(plane, **SIZE)
    own = await start_instance(
        plane, prefix="tenant-b-runtime", isolation_mode=IsolationMode.HYBRID, tenant_id="tenant-b", **SIZE
    )
    try:
        views = {view.runtime_instance_id: view for view in await plane.tenant_capacity(TENANT_B)}
        mine = views[own.settings.runtime_instance_id]
        assert mine.dedicated_to_tenant and (mine.running, mine.queued, mine.active_workers) == (0, 0, 0)
        assert mine.available_run_slots == 3 and mine.can_accept_run is True
        assert [
            v for v in views.values() if not v.dedicated_to_tenant
        ]  # the shared fallback, figures withheld
        others = {view.runtime_instance_id for view in await plane.tenant_capacity(DEFAULT_TENANT)}
        assert own.settings.runtime_instance_id not in others
    finally:
        gate.release()
        await plane.stop()
