"""Seed 001 scale-out: RequestScaleOut -> Redis request -> watcher -> local scaler -> requeue -> pump."""

from __future__ import annotations

import asyncio

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import IsolationMode, LocalRunStatus
from runtime_core.queueing import QueueItemStatus, ScaleOutStatus, SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    ONE_STEP,
    TENANT_A,
    TENANT_B,
    control_plane,
    start_instance,
)


async def run_completed(plane: ControlPlane, shared_run_id: str) -> None:
    async def completed() -> bool:
        record = await plane.parts.index.get_by_shared(shared_run_id)
        return record is not None and record.status is LocalRunStatus.COMPLETED

    await wait_until(completed, timeout=10)


async def scale_out_to_completion(plane: ControlPlane, snapshot: ExecutionContextSnapshot) -> str:
    """Direct submit -> watcher -> manual drain -> completion; returns the assigned instance id."""
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, snapshot)
    assert submitted.status is SharedRunStatus.SCALE_OUT_REQUESTED
    [request] = await plane.parts.watcher.process_pending()
    assert request.status is ScaleOutStatus.FULFILLED
    await plane.drain(10, snapshot)
    await run_completed(plane, submitted.shared_run_id)
    run = await plane.parts.runs.get(submitted.shared_run_id)
    assert run is not None and run.assigned_runtime_instance_id == request.fulfilled_runtime_instance_id
    return run.assigned_runtime_instance_id or ""


async def test_direct_dispatch_scale_out_from_zero_instances_runs_to_completion(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    try:
        assert plane.parts.pool.instances() == []
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        run = await plane.parts.runs.get(submitted.shared_run_id)
        assert (
            submitted.status is SharedRunStatus.SCALE_OUT_REQUESTED
            and submitted.admission_decision == "RequestScaleOut"
        )
        assert run is not None and run.status is SharedRunStatus.SCALE_OUT_REQUESTED
        assert run.scale_out_request_id == submitted.scale_out_request_id

        [request] = await plane.parts.watcher.process_pending()
        requeued = await plane.parts.runs.get(submitted.shared_run_id)
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert request.status is ScaleOutStatus.FULFILLED
        assert request.fulfilled_runtime_instance_id == "rt_testhost:runtime-instance-1"
        assert requeued is not None and requeued.status is SharedRunStatus.QUEUED_GLOBALLY
        assert requeued.local_run_id is None and item is not None and item.status is QueueItemStatus.PENDING

        await plane.drain(10, DEFAULT_TENANT)
        await run_completed(plane, submitted.shared_run_id)
        view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        stored_request = await plane.parts.scale_out.get(request.request_id)
        assert view.shared_status == "Dispatched" and view.queue_status == "Dispatched"
        assert view.assigned_runtime_instance_id == "rt_testhost:runtime-instance-1"
        assert view.local_run_id and view.execution_id and view.local_status == "Completed"
        assert stored_request is not None and stored_request.status is ScaleOutStatus.FULFILLED
        assert len(plane.parts.pool.instances()) == 1
    finally:
        await plane.stop()


async def test_scale_out_request_persists_the_tenant_runtime_settings(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, TENANT_A)
    request = await plane.parts.scale_out.get(submitted.scale_out_request_id or "")
    assert request is not None and request.status is ScaleOutStatus.PENDING
    assert (request.tenant_id, request.snapshot, request.shared_run_id) == (
        "tenant-a",
        TENANT_A,
        submitted.shared_run_id,
    )
    assert request.tenant_settings == plane.parts.tenants.resolve("tenant-a")
    assert request.tenant_settings.runtime_instance_id_prefix == "tenant-a-runtime"


async def test_dedicated_tenant_a_scale_out_creates_its_own_runtime_despite_a_shared_instance(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    shared = await start_instance(plane)
    try:
        assigned = await scale_out_to_completion(plane, TENANT_A)
        instance = plane.parts.pool.get(assigned)
        assert assigned == "rt_testhost:tenant-a-runtime-1"
        assert (
            instance.settings.isolation_mode is IsolationMode.DEDICATED
            and instance.settings.tenant_id == "tenant-a"
        )
        assert (instance.settings.worker_count, instance.settings.max_concurrent_runs) == (10, 5)
        assert shared.local_runs() == []
    finally:
        await plane.stop()


async def test_hybrid_tenant_b_scale_out_creates_tenant_b_runtime_1(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    try:
        assigned = await scale_out_to_completion(plane, TENANT_B)
        assert assigned == "rt_testhost:tenant-b-runtime-1"
        assert plane.parts.pool.get(assigned).settings.isolation_mode is IsolationMode.HYBRID
    finally:
        await plane.stop()


async def test_local_scaler_counts_instances_by_tenant_prefix_and_stops_at_the_maximum(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    scaler, tenant_b = plane.parts.scaler, plane.parts.tenants.resolve("tenant-b")
    await start_instance(plane)
    try:
        outcomes = [await scaler.scale_out(tenant_b, TENANT_B) for _ in range(3)]
        assert [o.fulfilled for o in outcomes] == [True, True, False]
        assert [o.runtime_instance_id for o in outcomes[:2]] == [
            "rt_testhost:tenant-b-runtime-1",
            "rt_testhost:tenant-b-runtime-2",
        ]
        assert outcomes[2].active_instances == 2 and len(plane.parts.pool.instances()) == 3
    finally:
        await plane.stop()


async def test_two_watchers_handle_one_scale_out_request_once(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    try:
        await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        handled = await asyncio.gather(
            plane.parts.watcher.process_pending(), plane.parts.watcher.process_pending()
        )
        assert sorted(len(h) for h in handled) == [0, 1]
        assert len(plane.parts.pool.instances()) == 1
    finally:
        await plane.stop()


async def test_scale_out_with_background_pump_and_watcher_completes_without_manual_steps(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, background_pump=True)
    await plane.start()
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, TENANT_A)
        await run_completed(plane, submitted.shared_run_id)
        view = await plane.run_status(submitted.shared_run_id, TENANT_A)
        assert view.assigned_runtime_instance_id == "rt_testhost:tenant-a-runtime-1"
        assert view.pump_runtime_instance_id == plane.settings.control_plane_id
    finally:
        await plane.stop()
