"""Seed 001 heavy dispatch: 50 queue-first shared runs x 100 steps over 3 in-process instances."""

from __future__ import annotations

from collections import Counter

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import HotState
from runtime_core.instances import LocalRunStatus
from runtime_core.providers import DispatchRequest, DispatchResponse, LocalRuntimeProvider
from runtime_core.queueing import SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    chain_and_fan_pipeline,
    control_plane,
    start_instance,
)

RUNS = 50
STEPS_PER_RUN = 100


class DispatchCountingProvider(LocalRuntimeProvider):
    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane.parts.pool, plane.parts.scaler)
        self.dispatches: Counter[str] = Counter()

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        response = await super().dispatch(request)
        self.dispatches[request.shared_run_id or ""] += 1
        return response


async def test_fifty_shared_runs_of_100_steps_over_three_instances_complete_without_duplicate_dispatch(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state, background_pump=True, pump_idle_interval_ms=10)
    provider = DispatchCountingProvider(plane)
    plane.parts.providers.add(provider)
    sizes = {"worker_count": 8, "max_local_workers_per_execution": 4, "max_concurrent_runs": 4}
    instances = [await start_instance(plane, n=n, **sizes) for n in (1, 2, 3)]
    pipeline = chain_and_fan_pipeline(STEPS_PER_RUN)
    try:
        ids = [
            (await plane.submit(pipeline, {"run": i}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
            for i in range(RUNS)
        ]
        await plane.start()

        async def all_completed() -> bool:
            records = [await plane.parts.index.get_by_shared(shared_run_id) for shared_run_id in ids]
            return all(r is not None and r.status is LocalRunStatus.COMPLETED for r in records)

        await wait_until(all_completed, timeout=60, interval=0.1)

        assert set(provider.dispatches) == set(ids) and set(provider.dispatches.values()) == {1}
        instance_ids = {i.runtime_instance_id for i in instances}
        assigned: Counter[str | None] = Counter()
        for shared_run_id in ids:
            run = await plane.parts.runs.get(shared_run_id)
            assert run is not None and run.status is SharedRunStatus.DISPATCHED
            assert run.assigned_runtime_instance_id in instance_ids
            assert run.reservation_expires_at_ms is not None
            assigned[run.assigned_runtime_instance_id] += 1
        assert set(assigned) == instance_ids
        delivered = Counter(r.shared_run_id for i in instances for r in i.local_runs())
        assert set(delivered.values()) == {1} and len(delivered) == RUNS
        view = await plane.run_status(ids[-1], DEFAULT_TENANT)
        assert view.execution_status == "Completed" and len(view.steps) == STEPS_PER_RUN
        assert {row.status for row in view.steps} == {"Completed"}
    finally:
        await plane.stop()
