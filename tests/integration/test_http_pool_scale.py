"""Seed 001 pooled HTTP hosting: 50 queue-first runs x 100 steps over 3 child instances of one process."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from runtime_core.hot_state import EmbeddedRedis, HotState
from runtime_core.instances import HostTransport, InstanceRegistry, LocalRunStatus
from runtime_core.providers import DispatchRequest, DispatchResponse, HttpRuntimeProvider
from runtime_core.queueing import SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, chain_and_fan_pipeline
from tests.integration.remote_support import hosted_control_plane, start_shared_host

RUNS = 50
STEPS_PER_RUN = 100


class DispatchCountingHttpProvider(HttpRuntimeProvider):
    def __init__(self, registry: InstanceRegistry) -> None:
        super().__init__(registry)
        self.dispatches: Counter[str] = Counter()

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        response = await super().dispatch(request)
        self.dispatches[request.shared_run_id or ""] += 1
        return response


async def test_fifty_runs_of_100_steps_over_three_pooled_http_children_complete_without_duplicate_dispatch(
    hot_state: HotState, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    async with hosted_control_plane(
        hot_state, redis_server, tmp_path, background_pump=True, pump_idle_interval_ms=10
    ) as plane:
        provider = DispatchCountingHttpProvider(plane.parts.registry)
        plane.parts.providers.add(provider)
        hosted = await start_shared_host(
            plane,
            HostTransport.HTTP,
            pool_size=3,
            worker_count=8,
            max_local_workers_per_execution=4,
            max_concurrent_runs=4,
        )
        pipeline = chain_and_fan_pipeline(STEPS_PER_RUN)
        ids = [
            (await plane.submit(pipeline, {"run": i}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
            for i in range(RUNS)
        ]

        async def all_completed() -> bool:
            records = [await plane.parts.index.get_by_shared(shared_run_id) for shared_run_id in ids]
            return all(r is not None and r.status is LocalRunStatus.COMPLETED for r in records)

        await wait_until(all_completed, timeout=80, interval=0.2)

        assert set(provider.dispatches) == set(ids) and set(provider.dispatches.values()) == {1}
        assigned: Counter[str | None] = Counter()
        for shared_run_id in ids:
            run = await plane.parts.runs.get(shared_run_id)
            assert (
                run is not None and run.status is SharedRunStatus.DISPATCHED and run.provider_name == "http"
            )
            assigned[run.assigned_runtime_instance_id] += 1
        assert set(assigned) == set(hosted.runtime_instance_ids)
        local_runs = await plane.parts.index.list_tenant(DEFAULT_TENANT, limit=10 * RUNS)
        delivered = Counter(record.shared_run_id for record in local_runs)
        assert set(delivered) == set(ids) and set(delivered.values()) == {1}
        view = await plane.run_status(ids[-1], DEFAULT_TENANT)
        assert view.execution_status == "Completed" and len(view.steps) == STEPS_PER_RUN
        assert {row.status for row in view.steps} == {"Completed"}
