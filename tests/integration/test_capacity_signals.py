"""Capacity freed in one process wakes the pumps of the others (Redis pub/sub).

Two control planes share one Redis: A hosts a runtime instance of one run slot behind a real
HTTP command endpoint; B has no instance of its own and dispatches to A's over HTTP with a
background pump that idles a minute between cycles that dispatched nothing. When A's run
ends, its heartbeat announces the freed slot on the capacity channel and B's pump dispatches
the run waiting in the shared queue at once. Runs on a single Redis and on a Redis Cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.hosting import HttpCommandEndpoint, RuntimeCommands, build_http_app
from runtime_core.hot_state import HotState, find_free_port
from runtime_core.queueing import PumpStopReason, SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    GATED,
    GateExecutor,
    control_plane,
    start_instance,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")

IDLE_INTERVAL_MS = 60_000  # B's pump never polls within a test: only a wake-up dispatches


@dataclass
class Planes:
    host: ControlPlane  # A: the instance's process
    other: ControlPlane  # B: the pump that must be woken
    gate: GateExecutor


@pytest.fixture
async def planes(hot_state: HotState) -> AsyncIterator[Planes]:
    gate = GateExecutor()
    host = control_plane(hot_state, gate, host="plane-a")
    port = find_free_port()
    endpoint = HttpCommandEndpoint(
        build_http_app(RuntimeCommands(host.parts.pool), lambda: {}), "127.0.0.1", port
    )
    await endpoint.start()
    await start_instance(
        host,
        "http-runtime",
        max_concurrent_runs=1,
        provider_name="http",
        transport_name="http",
        transport_endpoint=f"http://127.0.0.1:{port}",
    )
    other = control_plane(
        hot_state,
        GateExecutor(),
        host="plane-b",
        background_pump=True,
        pump_idle_interval_ms=IDLE_INTERVAL_MS,
    )
    await other.start()
    try:
        yield Planes(host, other, gate)
    finally:
        await other.stop()
        await host.stop()
        await endpoint.stop()


async def test_a_run_ending_in_another_process_wakes_the_idle_pump_at_once(planes: Planes) -> None:
    other = planes.other
    first = await other.submit(GATED, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    await wait_until(lambda: _async(planes.gate.started == 1), timeout=20)  # it holds the only slot
    pump = other.parts.background_pump
    cycles = pump.cycles
    second = await other.submit(GATED, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)

    # B's pump looked after the submit, found no capacity for the second run and went idle.
    await wait_until(lambda: _async(pump.cycles > cycles and pump.idle), timeout=20)
    assert pump.last_stop is PumpStopReason.NO_CAPACITY
    planes.gate.release()

    async def dispatched() -> bool:
        run = await other.parts.runs.get(second.shared_run_id)
        return run is not None and run.status is SharedRunStatus.DISPATCHED

    await wait_until(dispatched, timeout=20)
    record = await other.parts.runs.get(first.shared_run_id)
    assert record is not None and record.status is SharedRunStatus.DISPATCHED


async def _async(value: bool) -> bool:
    return value
