"""Seed 001 tenant-aware dispatch and run isolation: Shared / Dedicated / Hybrid, RunId visibility."""

from __future__ import annotations

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import NotFoundError
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import IsolationMode, LocalRunStatus, LocalRunView, RuntimeInstance
from runtime_core.providers import CancelRunRequest, LocalRuntimeProvider, RunRef
from runtime_core.queueing import SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    ONE_STEP,
    TENANT_A,
    TENANT_B,
    control_plane,
    start_instance,
)

WIDE = {"worker_count": 20, "max_local_workers_per_execution": 2, "max_concurrent_runs": 10}


async def dedicated(
    plane: ControlPlane, snapshot: ExecutionContextSnapshot, mode: IsolationMode, prefix: str
) -> RuntimeInstance:
    return await start_instance(
        plane, prefix=prefix, isolation_mode=mode, tenant_id=snapshot.tenant_id, **WIDE
    )


async def submit_and_drain(
    plane: ControlPlane, snapshot: ExecutionContextSnapshot, count: int = 1
) -> list[str]:
    ids = [
        (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, snapshot)).shared_run_id
        for _ in range(count)
    ]
    await plane.drain(50, snapshot)
    return ids


async def assigned(plane: ControlPlane, shared_run_id: str) -> str | None:
    run = await plane.parts.runs.get(shared_run_id)
    assert run is not None
    return run.assigned_runtime_instance_id


async def test_default_tenant_runs_on_shared_runtime_instance_1(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane, **WIDE)
    try:
        [shared_run_id] = await submit_and_drain(plane, DEFAULT_TENANT)
        assert (await assigned(plane, shared_run_id) or "").endswith(":runtime-instance-1")
    finally:
        await plane.stop()


async def test_dedicated_tenant_a_never_lands_on_shared_capacity(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    shared = await start_instance(plane, **WIDE)
    try:
        ids = await submit_and_drain(plane, TENANT_A, count=3)
        assert shared.local_runs() == []
        for shared_run_id in ids:
            run = await plane.parts.runs.get(shared_run_id)
            assert run is not None and run.status is SharedRunStatus.QUEUED_GLOBALLY
        await dedicated(plane, TENANT_A, IsolationMode.DEDICATED, "tenant-a-runtime")
        await plane.drain(50, TENANT_A)
        assert shared.local_runs() == []
        for shared_run_id in ids:
            assert (await assigned(plane, shared_run_id) or "").endswith(":tenant-a-runtime-1")
    finally:
        await plane.stop()


async def test_hybrid_tenant_b_prefers_its_own_runtime_over_visible_shared_capacity(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane, **WIDE)
    await dedicated(plane, TENANT_B, IsolationMode.HYBRID, "tenant-b-runtime")
    try:
        ids = await submit_and_drain(plane, TENANT_B, count=3)
        for shared_run_id in ids:
            assert (await assigned(plane, shared_run_id) or "").endswith(":tenant-b-runtime-1")
    finally:
        await plane.stop()


async def test_hybrid_tenant_b_falls_back_to_shared_capacity_when_allowed(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane, **WIDE)
    try:
        [shared_run_id] = await submit_and_drain(plane, TENANT_B)
        assert (await assigned(plane, shared_run_id) or "").endswith(":runtime-instance-1")
    finally:
        await plane.stop()


async def test_registry_and_capacity_listing_is_filtered_by_tenant_visibility(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    shared = await start_instance(plane, **WIDE)
    own_a = await dedicated(plane, TENANT_A, IsolationMode.DEDICATED, "tenant-a-runtime")
    own_b = await dedicated(plane, TENANT_B, IsolationMode.HYBRID, "tenant-b-runtime")
    unowned_hybrid = await start_instance(plane, prefix="orphan", isolation_mode=IsolationMode.HYBRID)
    try:

        async def ids(snapshot: ExecutionContextSnapshot) -> set[str]:
            return {view.runtime_instance_id for view in await plane.list_instances(snapshot)}

        assert await ids(TENANT_A) == {own_a.runtime_instance_id}
        assert await ids(TENANT_B) == {shared.runtime_instance_id, own_b.runtime_instance_id}
        assert await ids(DEFAULT_TENANT) == {shared.runtime_instance_id}
        assert unowned_hybrid.runtime_instance_id not in await ids(TENANT_B)
    finally:
        await plane.stop()


async def _completed_run_of_tenant_a(plane: ControlPlane) -> tuple[str, str, str]:
    await dedicated(plane, TENANT_A, IsolationMode.DEDICATED, "tenant-a-runtime")
    [shared_run_id] = await submit_and_drain(plane, TENANT_A)

    async def completed() -> bool:
        record = await plane.parts.index.get_by_shared(shared_run_id)
        return record is not None and record.status is LocalRunStatus.COMPLETED

    await wait_until(completed, timeout=10)
    record = await plane.parts.index.get_by_shared(shared_run_id)
    assert record is not None and record.execution_id
    return shared_run_id, record.local_run_id, record.execution_id


async def test_tenant_a_reads_its_run_status_by_shared_local_or_execution_id(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    try:
        shared_run_id, local_run_id, execution_id = await _completed_run_of_tenant_a(plane)
        for any_id in (shared_run_id, local_run_id, execution_id):
            view = await plane.run_status(any_id, TENANT_A)
            assert (view.shared_run_id, view.local_run_id, view.execution_id) == (
                shared_run_id,
                local_run_id,
                execution_id,
            )
            assert (view.shared_status, view.queue_status) == ("Dispatched", "Dispatched")
            assert (view.local_status, view.execution_status) == ("Completed", "Completed")
            assert [row.name for row in view.steps] == ["only"] and view.result == {"data": {"step": "only"}}
    finally:
        await plane.stop()


async def test_tenant_b_cannot_read_tenant_a_run_status_by_any_id(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    try:
        for any_id in await _completed_run_of_tenant_a(plane):
            with pytest.raises(NotFoundError) as foreign:
                await plane.run_status(any_id, TENANT_B)
            unknown_id = any_id[:5] + "0" * (len(any_id) - 5)
            with pytest.raises(NotFoundError) as unknown:
                await plane.run_status(unknown_id, TENANT_B)
            assert foreign.value.to_dict() == {
                **unknown.value.to_dict(),
                "message": f"Run '{any_id}' not found.",
            }
    finally:
        await plane.stop()


async def test_tenant_b_cannot_cancel_tenant_a_run_and_learns_no_execution_id(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    try:
        shared_run_id, local_run_id, execution_id = await _completed_run_of_tenant_a(plane)
        for any_id in (shared_run_id, local_run_id):
            with pytest.raises(NotFoundError) as foreign:
                await plane.cancel(any_id, TENANT_B)
            assert execution_id not in str(foreign.value)
    finally:
        await plane.stop()


class CountingProvider(LocalRuntimeProvider):
    """The local provider, counting how often a local controller is asked about a run."""

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane.parts.pool, plane.parts.scaler)
        self.calls = 0

    async def run_status(self, ref: RunRef) -> LocalRunView:
        self.calls += 1
        return await super().run_status(ref)

    async def cancel_run(self, request: CancelRunRequest) -> LocalRunView:
        self.calls += 1
        return await super().cancel_run(request)


async def test_run_status_and_cancel_check_the_run_index_before_the_local_controller(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    provider = CountingProvider(plane)
    plane.parts.providers.add(provider)
    try:
        _shared, local_run_id, _execution = await _completed_run_of_tenant_a(plane)
        for call in (plane.run_status, plane.cancel):
            with pytest.raises(NotFoundError):
                await call(local_run_id, TENANT_B)
        assert provider.calls == 0
        await plane.run_status(local_run_id, TENANT_A)
        assert provider.calls == 1
    finally:
        await plane.stop()


async def test_tenant_b_cannot_pause_the_queue_of_tenant_a_runtime(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    own_a = await dedicated(plane, TENANT_A, IsolationMode.DEDICATED, "tenant-a-runtime")
    try:
        with pytest.raises(NotFoundError):
            await plane.pause_queue(own_a.runtime_instance_id, TENANT_B)
        assert own_a.queue_state().paused is False
        state = await plane.pause_queue(own_a.runtime_instance_id, TENANT_A, reason="tenant maintenance")
        assert state.paused and state.requested_by == TENANT_A.user_id
    finally:
        await plane.stop()


async def test_a_drain_reports_and_records_only_the_callers_tenant(hot_state: HotState) -> None:
    """Issue 13.11: tenant B's drain also dispatches tenant A's queued runs; B's answer (counts,
    progress, pending) covers only B's runs, and A's records name no user of B."""
    plane = control_plane(hot_state)
    await start_instance(plane, **WIDE)  # Shared: B (Hybrid) falls back to it, A (Dedicated) never
    progress: list[tuple[int, str]] = []

    async def on_progress(done: int, total: int, message: str) -> None:
        progress.append((done, message))

    try:
        a_ids = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT_A)).shared_run_id
            for _ in range(3)
        ]
        b_ids = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT_B)).shared_run_id
            for _ in range(2)
        ]
        first = await plane.drain(50, TENANT_B, on_progress)
        assert (first.attempted, first.dispatched, first.no_capacity, first.pending_after) == (2, 2, 0, 0)
        assert sorted(run.shared_run_id for run in first.runs) == sorted(b_ids)
        assert [done for done, _ in progress] == [1, 2]
        assert all(any(b_id in message for b_id in b_ids) for _, message in progress), progress
        assert (await plane.drain(50, TENANT_A)).pending_after == 3  # A's runs were there all along

        await dedicated(plane, TENANT_A, IsolationMode.DEDICATED, "tenant-a-runtime")
        progress.clear()
        second = await plane.drain(50, TENANT_B, on_progress)
        assert (second.attempted, second.dispatched, second.pending_after, second.runs) == (0, 0, 0, [])
        assert progress == []
        for a_id in a_ids:
            record = await plane.parts.runs.get(a_id)
            status = await plane.run_status(a_id, TENANT_A)
            assert record is not None and record.status is not SharedRunStatus.QUEUED_GLOBALLY
            assert status.pump_worker_id == "drain"
            seen_by_a = record.model_dump_json() + status.model_dump_json()
            assert TENANT_B.user_id not in seen_by_a and TENANT_B.tenant_id not in seen_by_a
    finally:
        await plane.stop()
