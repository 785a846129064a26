"""Control-plane latency through real MCP sessions: submit -> Dispatched, submit -> Completed
(1-step pipeline), in-memory and over streamable HTTP, and `queue.drain` of queued runs: once
bound by execution (1-step runs finishing on one instance), once into free capacity (runs
park on human.approval, so the figure is the dispatch path itself: claim, admission,
reservation, provider, local run start)."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from benchmarks._harness import RoundTripCounter, Row, counting_every_connection, percentile
from benchmarks._mcp import admin_client, call_tool
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.events import TERMINAL_EVENTS, RunEvent, RunEventType
from runtime_core.hot_state import find_free_port

ONE_STEP = {"name": "bench-one", "steps": [{"name": "only", "stepKey": "test.noop"}]}
PARKING = {"name": "bench-park", "steps": [{"name": "approve", "stepKey": "human.approval"}]}
REPOSITORY = Path(__file__).resolve().parents[1]


async def _one_run(client: Client, mode: str) -> tuple[float, float]:
    started = time.perf_counter()
    run_id = (await call_tool(client, "submit", {"definition": ONE_STEP, "mode": mode}))["shared_run_id"]
    dispatched = None
    while True:
        status = await call_tool(client, "run.status", {"run_id": run_id})
        if dispatched is None and status["local_run_id"]:
            dispatched = time.perf_counter() - started
        if status["done"]:
            return dispatched or 0.0, time.perf_counter() - started


async def _latency_rows(client: Client, transport: str, iterations: int) -> list[Row]:
    rows = []
    for mode in ("DirectDispatch", "QueueFirst"):
        samples = [await _one_run(client, mode) for _ in range(iterations)]
        for label, values in (
            ("Dispatched", [s[0] for s in samples]),
            ("Completed", [s[1] for s in samples]),
        ):
            ms = [v * 1000 for v in values]
            rows.append(
                Row(
                    "mcp latency",
                    f"{transport} {mode} submit->{label}",
                    iterations,
                    sum(values),
                    iterations / sum(values),
                    0,
                    0,
                    percentile(ms, 50),
                    percentile(ms, 99),
                )
            )
    return rows


def _settings(
    redis_url: str, data_dir: Path, *, background_pump: bool, max_concurrent_runs: int
) -> RuntimeSettings:
    """16 run slots: execution-bound. More: a worker per run (a parked run keeps its worker)."""
    workers = {} if max_concurrent_runs <= 16 else {"workers_per_instance": max_concurrent_runs}
    return RuntimeSettings(
        redis_url=redis_url,
        redis_prefix=f"bm{secrets.token_hex(3)}:",
        data_dir=data_dir,
        control_plane=ControlPlaneSettings(
            background_pump=background_pump,
            pump_idle_interval_ms=5,
            local_queue_capacity=2_000,
            max_concurrent_runs_per_instance=max_concurrent_runs,
            max_local_workers_per_execution=1,
            **workers,
        ),
    )


@asynccontextmanager
async def _in_memory_client(
    redis_url: str, data_dir: Path, *, background_pump: bool, max_concurrent_runs: int = 16
) -> AsyncIterator[Client]:
    async with _in_memory_stack(redis_url, data_dir, background_pump, max_concurrent_runs) as (client, _):
        yield client


@asynccontextmanager
async def _in_memory_stack(
    redis_url: str, data_dir: Path, background_pump: bool, max_concurrent_runs: int
) -> AsyncIterator[tuple[Client, RuntimeServices]]:
    settings = _settings(
        redis_url, data_dir, background_pump=background_pump, max_concurrent_runs=max_concurrent_runs
    )
    async with RuntimeServices(settings) as services:
        async with admin_client(services) as client:
            yield client, services


@asynccontextmanager
async def _http_client(redis_url: str, data_dir: Path) -> AsyncIterator[Client]:
    port = find_free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "MCP_RUNTIME_REDIS_PREFIX": f"bh{secrets.token_hex(3)}:"}
    command = [
        "mcp-runtime",
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--config",
        str(REPOSITORY / "examples" / "config" / "principals.json"),
    ]
    server = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        async with httpx2.AsyncClient(
            headers={"Authorization": "Bearer demo-admin-token"}, timeout=60
        ) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                if time.monotonic() > deadline or server.returncode is not None:
                    raise RuntimeError("MCP HTTP server did not start")
                await asyncio.sleep(0.05)  # waiting for another process to listen
            async with Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            ) as client:
                yield client
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), timeout=30)


@dataclass
class DrainCost:
    """`seconds` until every run was dispatched; client round trips per run (until every run
    ended or parked: its start and end or park included) and queue.drain calls per run."""

    seconds: float
    round_trips_per_run: float
    drains_per_run: float


async def _drain(
    redis_url: str,
    data_dir: Path,
    runs: int,
    pipeline: dict[str, Any],
    max_concurrent_runs: int,
    *,
    paced: bool = True,
) -> DrainCost:
    """`runs` queued runs dispatched by queue.drain calls. `paced`: after a drain that left
    runs queued, the client calls again once a run ended (heard on the run-event channel: no
    round trips), the way a client drains into busy capacity; else it calls again at once
    (a spinning client: every call that finds the instances busy counts too)."""
    async with _in_memory_stack(redis_url, data_dir, False, max_concurrent_runs) as (client, services):
        settled = _RunsSettled(runs)
        services.run_events.listen(settled.hear)
        await services.run_events.wait_subscribed()
        for _ in range(runs):
            await call_tool(client, "submit", {"definition": pipeline, "mode": "QueueFirst"})
        sends_before = RoundTripCounter.sends
        started = time.perf_counter()
        dispatched = drains = 0
        with counting_every_connection():
            while dispatched < runs:
                settled.ended.clear()
                drained = await call_tool(client, "queue.drain", {"max_count": runs})
                dispatched, drains = dispatched + drained["dispatched"], drains + 1
                if paced and dispatched < runs:
                    await asyncio.wait_for(settled.ended.wait(), timeout=600)
            seconds = time.perf_counter() - started
            await asyncio.wait_for(settled.all.wait(), timeout=600)
    return DrainCost(seconds, (RoundTripCounter.sends - sends_before) / runs, drains / runs)


class _RunsSettled:
    """Set once `runs` runs ended or parked (heard on the run-event channel: no round trips);
    `ended`: set by each run's end."""

    def __init__(self, runs: int) -> None:
        self.left = runs
        self.all = asyncio.Event()
        self.ended = asyncio.Event()

    def hear(self, event: RunEvent) -> None:
        if event.type in TERMINAL_EVENTS:
            self.ended.set()
        if event.type in TERMINAL_EVENTS or event.type is RunEventType.WAITING_FOR_INPUT:
            self.left -= 1
            if self.left <= 0:
                self.all.set()


DRAIN_VARIANTS = {
    "bound": ("{runs} queued 1-step runs, execution-bound (16 run slots)", ONE_STEP, 16, True),
    "bound-spinning": ("{runs} queued 1-step runs, execution-bound, spinning client", ONE_STEP, 16, False),
    "free": ("{runs} queued runs into free capacity (runs park)", PARKING, 0, True),
}
"""name -> (variant label, pipeline, run slots (0: one per run), paced client)."""


async def drain_row(redis_url: str, data_dir: Path, runs: int, name: str) -> Row:
    """One queue.drain figure; round trips include the runs' own execution start (and,
    execution-bound, completion); `extra` has the drain calls per run."""
    label, pipeline, slots, paced = DRAIN_VARIANTS[name]
    cost = await _drain(redis_url, data_dir / name, runs, pipeline, slots or runs, paced=paced)
    return Row(
        "mcp queue.drain",
        label.format(runs=runs),
        runs,
        cost.seconds,
        runs / cost.seconds,
        cost.round_trips_per_run,
        0,
        0,
        0,
        extra={"drain_calls_per_100_runs": 100 * cost.drains_per_run},
    )


async def _drain_rows(redis_url: str, data_dir: Path, runs: int) -> list[Row]:
    return [await drain_row(redis_url, data_dir, runs, name) for name in DRAIN_VARIANTS]


async def run(redis_url: str, *, iterations: int, drain_runs: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mcprt-bench-cp-") as tmp:
        root = Path(tmp)
        async with _in_memory_client(redis_url, root / "mem", background_pump=True) as client:
            rows = await _latency_rows(client, "in-memory", iterations)
        async with _http_client(redis_url, root / "http") as client:
            rows += await _latency_rows(client, "http", iterations)
        rows += await _drain_rows(redis_url, root / "drain", drain_runs)
    return rows
