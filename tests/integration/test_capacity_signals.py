"""Capacity freed in one process wakes the pumps of the others (Redis pub/sub).

Two control planes share one Redis: A hosts a runtime instance of one run slot behind a real
HTTP command endpoint; B has no instance of its own and dispatches to A's over HTTP with a
background pump that idles a minute between cycles that dispatched nothing. When A's run
ends, its heartbeat announces the freed slot on the capacity channel and B's pump dispatches
the run waiting in the shared queue at once. A run queued by a process without a control plane
(an agent's child run in a runtime-instance process) wakes it too, through its `run.queued`
event. A drain that found every instance busy keeps that listing until capacity is freed.
Runs on a single Redis and on a Redis Cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.events import RunEventPublisher
from runtime_core.hosting import HttpCommandEndpoint, RuntimeCommands, build_http_app
from runtime_core.hot_state import HotState, find_free_port
from runtime_core.queueing import (
    PumpStopReason,
    SharedQueue,
    SharedRunJournal,
    SharedRunStatus,
    SharedRunStore,
    SharedRuntimeController,
    SubmitMode,
)
from tests.helpers import command_calls, wait_until
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


async def test_a_run_queued_by_a_process_without_a_control_plane_wakes_the_idle_pump(
    planes: Planes, hot_state: HotState
) -> None:
    pump = planes.other.parts.background_pump
    await wait_until(lambda: _async(pump.gate_passed and pump.idle), timeout=20)
    events = RunEventPublisher(hot_state)
    runs = SharedRunStore(hot_state)
    elsewhere = SharedRuntimeController(  # the submit path of an EngineServices-only process
        runs,
        SharedQueue(hot_state),
        SharedRunJournal(None, events),
        validate=planes.host.parts.engine.validate,
    )
    try:
        queued = await elsewhere.submit(GATED, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        assert queued.status is SharedRunStatus.QUEUED_GLOBALLY  # no admission here: queued first

        async def dispatched() -> bool:
            run = await runs.get(queued.shared_run_id)
            return run is not None and run.status is SharedRunStatus.DISPATCHED

        await wait_until(dispatched, timeout=20)  # B's pump idles a minute unless woken
    finally:
        planes.gate.release()
        await events.aclose()


async def _async(value: bool) -> bool:
    return value


async def test_a_drain_finding_every_instance_busy_reads_no_registry_until_capacity_is_freed(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate, scale_out_enabled=False)
    await start_instance(plane, max_concurrent_runs=1)
    try:
        await plane.submit(GATED, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        assert (await plane.drain(5, DEFAULT_TENANT)).dispatched == 1  # it holds the only slot
        waiting = await plane.submit(GATED, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)

        async def busy_listing_kept() -> bool:  # a drain found no capacity and kept that listing
            drained = await plane.drain(5, DEFAULT_TENANT)
            assert drained.stop_reason == PumpStopReason.NO_CAPACITY.value and drained.pending_after == 1
            return plane.parts.dispatcher.busy is not None and plane.parts.dispatcher.busy.get() is not None

        await wait_until(busy_listing_kept, timeout=20)
        listings = await command_calls(hot_state, "cmdstat_smembers")
        for _ in range(3):
            assert (await plane.drain(5, DEFAULT_TENANT)).dispatched == 0
        assert await command_calls(hot_state, "cmdstat_smembers") == listings  # no registry read
        gate.release()  # the run ends: its instance announces the freed slot, the listing goes

        async def dispatched() -> bool:
            await plane.drain(5, DEFAULT_TENANT)
            run = await plane.parts.runs.get(waiting.shared_run_id)
            return run is not None and run.status is SharedRunStatus.DISPATCHED

        await wait_until(dispatched, timeout=20)
    finally:
        await plane.stop()
