"""Issue 13.8: readiness covers every background loop a control plane is configured to run.

A RuntimeServices with hot-state retention and durable retention runs the lifecycle sweeper
and the durable purge next to the pump, the scale-out watcher, the dataset watch, the
recovery loops, the scheduler and its runtime instances' loops: /readyz names all of them, and a loop that
ended (here: its task cancelled, as an escaped error would end it) makes the process not
ready, naming that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.lifecycle import HotStateRetention
from tests.helpers import wait_until
from tests.integration.lifecycle_support import lifecycle_runtime

EXPECTED_LOOPS = {
    "pump",
    "scale_out_watcher",
    "dataset_watch",
    "runtime_instances",
    "lifecycle_sweeper",
    "lifecycle_purge",
    "scheduler",
}


@pytest.fixture
async def services(redis_server: EmbeddedRedis, tmp_path: Path) -> AsyncIterator[RuntimeServices]:
    settings = lifecycle_runtime(redis_server.url, tmp_path, HotStateRetention(enabled=True))
    async with RuntimeServices(settings) as started:
        yield started


def task_named(name: str) -> asyncio.Task[object]:
    [task] = [task for task in asyncio.all_tasks() if task.get_name() == name]
    return task


async def test_readiness_names_the_lifecycle_loops_next_to_the_others(services: RuntimeServices) -> None:
    loops = services.background_loops()
    assert EXPECTED_LOOPS <= set(loops) and all(loops.values())
    report = await services.health().ready()
    assert report.healthy
    detail = report.checks["background_loops"].detail
    assert "lifecycle_sweeper" in detail and "lifecycle_purge" in detail


@pytest.mark.parametrize(
    ("task_name", "loop"),
    [
        ("lifecycle.sweep", "lifecycle_sweeper"),
        ("lifecycle.purge", "lifecycle_purge"),
        ("scheduler", "scheduler"),
    ],
)
async def test_a_background_loop_that_ended_makes_the_process_not_ready(
    services: RuntimeServices, task_name: str, loop: str
) -> None:
    health = services.health()
    task_named(task_name).cancel()

    async def not_ready() -> bool:
        return not (await health.ready()).healthy

    await wait_until(not_ready, timeout=10)
    report = await health.ready()
    assert not report.checks["background_loops"].ok
    assert report.checks["background_loops"].detail.endswith(f"not running: {loop}")
