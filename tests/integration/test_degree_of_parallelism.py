"""Seed 003 `config.concurrency.maxDegreeOfParallelism`: at most that many steps of one execution
run at once, however many workers the engine or the runtime instance has (counted by a gate
executor that holds every call until released; real redis-server)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime_core.hot_state import HotState
from runtime_core.instances import LocalRunRequest, LocalRunStatus
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    GateExecutor,
    control_plane,
    make_engine,
    standalone_instance,
)

WIDTH = 10
WORKERS = 8


def _wide(dop: int | None) -> PipelineDefinition:
    config: dict[str, Any] = {"concurrency": {"maxDegreeOfParallelism": dop}} if dop else {}
    steps = [{"name": f"g{i}", "stepKey": "test.gate"} for i in range(WIDTH)]
    return parse_pipeline({"name": f"wide-{dop}", "config": config, "steps": steps})


async def _reached(gate: GateExecutor, count: int) -> bool:
    return gate.started >= count


@pytest.mark.parametrize(
    ("dop", "expected"), [(3, 3), (1, 1), (None, WORKERS)], ids=["dop-3", "dop-1", "unset"]
)
async def test_the_engine_runs_at_most_max_degree_of_parallelism_steps_at_once(
    hot_state: HotState, dop: int | None, expected: int
) -> None:
    gate = GateExecutor()
    engine, _ = make_engine(hot_state, gate)
    execution_id = await engine.create_execution(_wide(dop), {}, DEFAULT_TENANT)
    running = asyncio.create_task(engine.run(execution_id, workers=WORKERS))

    await wait_until(lambda: _reached(gate, expected))
    in_flight = gate.active[execution_id]
    gate.release()

    assert await running == "Completed"
    assert in_flight == expected
    assert gate.max_active[execution_id] == expected  # the unset case shows the probe sees every worker


async def test_a_runtime_instance_holds_only_max_degree_of_parallelism_workers_for_the_run(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await standalone_instance(
        plane, worker_count=WORKERS, max_local_workers_per_execution=WORKERS, max_concurrent_runs=2
    ).start()
    try:
        view = await instance.enqueue(LocalRunRequest(pipeline=_wide(2), input={}, snapshot=DEFAULT_TENANT))
        await wait_until(lambda: _reached(gate, 2))
        capacity = instance.capacity()
        gate.release()
        final = await instance.wait_for_run(view.local_run_id, timeout=20)
    finally:
        gate.release()
        await instance.stop()

    assert (capacity.active_workers, capacity.available_workers) == (2, WORKERS - 2)
    assert final.status is LocalRunStatus.COMPLETED and final.effective_workers == 2
    assert max(gate.max_active.values()) == 2
