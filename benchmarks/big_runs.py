"""Big runs: what one execution costs at each stage as it grows from 1,000 to 100,000 steps.

For a fan-out (start -> n - 2 branches -> join) and a layered DAG (layers of equal width, each
step depending on two steps of the layer before), each size runs on a fresh runtime (real
redis-server, SQLite durable store, one in-process instance with 4 workers, pipeline limits
raised by configuration) driven through an in-memory MCP session, stage by stage:

- validate: `pipelines.validate`; submit: `submit` (QueueFirst); dispatch: `queue.drain`;
- execute: until the run's end is heard on the run-event channel (execution creation, the
  steps, finalization and the audit records; hybrid retention on: compaction and eviction
  of results as they complete, its passes' own time reported as `retention`);
- run.status: the first page, then every page of 1,000 steps;
- run page: what the dashboard's run page reads and renders (the run view's graph, the
  evidence, the HTML);
- archive: the lifecycle sweeper archiving the finished run (run record with its step rows,
  hot keys dropped).

Each row: the stage's time, microseconds per step; `extra` carries the Redis bytes per step of
the execution's keys (once it finished, before archiving, with retention) and the control
plane's resident memory (the whole process: control plane, instance, engine). A stage that is
linear in the steps keeps its microseconds per step as the run grows tenfold.
"""

from __future__ import annotations

import asyncio
import os
import resource
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from mcp import Client

from benchmarks._harness import Row
from benchmarks._mcp import ADMIN, admin_client, backend_of, call_tool
from mcp_runtime.run_view import run_app_html
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.events import TERMINAL_EVENTS, RunEvent
from runtime_core.lifecycle import DurableRetention, HotStateRetention, LifecycleSettings
from runtime_core.pipeline import PipelineLimits

T = TypeVar("T")
HYBRID = {"policies": ["retention.hybrid.default"], "triggers": {"completedSteps": 500}}
STATUS_PAGE = 1_000


def fan_out(steps: int) -> dict[str, Any]:
    body: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.noop"}]
    branches = [f"b{i:06d}" for i in range(steps - 2)]
    body += [{"name": name, "stepKey": "test.noop", "dependsOn": ["start"]} for name in branches]
    body.append({"name": "join", "stepKey": "test.noop", "dependsOn": branches})
    return {"name": f"fan-{steps}", "config": {"retention": HYBRID}, "steps": body}


def layered(steps: int, layers: int) -> dict[str, Any]:
    """`layers` layers of `steps // layers` steps; a step depends on two of the layer before."""
    width = max(1, steps // layers)
    body = []
    for layer in range(layers):
        for i in range(width):
            before = [f"l{layer - 1:04d}s{j:05d}" for j in sorted({i, (i + 1) % width})] if layer else []
            body.append({"name": f"l{layer:04d}s{i:05d}", "stepKey": "test.noop", "dependsOn": before})
    return {"name": f"layered-{steps}", "config": {"retention": HYBRID}, "steps": body}


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _settings(redis_url: str, data_dir: Path, limit: int) -> RuntimeSettings:
    return RuntimeSettings(
        redis_url=redis_url,
        redis_prefix=f"bg{secrets.token_hex(3)}:",
        data_dir=data_dir,
        pipeline_limits=PipelineLimits(max_steps=limit, max_bytes=64 * 2**20),
        control_plane=ControlPlaneSettings(
            background_pump=False,
            workers_per_instance=4,
            max_local_workers_per_execution=4,
            lifecycle=LifecycleSettings(
                hot=HotStateRetention(enabled=False, grace_ms=0), durable=DurableRetention()
            ),
        ),
    )


@asynccontextmanager
async def _runtime(
    redis_url: str, data_dir: Path, limit: int
) -> AsyncIterator[tuple[Client, RuntimeServices]]:
    async with RuntimeServices(_settings(redis_url, data_dir, limit)) as services:
        async with admin_client(services) as client:
            yield client, services


class _Stages:
    """Times each stage of one run and makes its row."""

    def __init__(self, label: str, steps: int) -> None:
        self.label, self.steps = label, steps
        self.rows: list[Row] = []

    async def timed(self, stage: str, work: Callable[[], Awaitable[T]], **extra: float) -> T:
        started = time.perf_counter()
        result = await work()
        self.add(stage, time.perf_counter() - started, **extra)
        return result

    def add(self, stage: str, seconds: float, **extra: float) -> None:
        extra = {"us_per_step": seconds * 1e6 / self.steps, "rss_mb": _rss_mb(), **extra}
        self.rows.append(
            Row(
                "big runs",
                f"{self.label}: {stage}",
                self.steps,
                seconds,
                self.steps / max(seconds, 1e-9),
                0,
                0,
                0,
                0,
                extra=extra,
            )
        )


async def _one_run(
    redis_url: str, data_dir: Path, label: str, pipeline: dict[str, Any], limit: int
) -> list[Row]:
    steps = len(pipeline["steps"])
    stages = _Stages(label, steps)
    async with _runtime(redis_url, data_dir, limit) as (client, services):
        ended = asyncio.Event()

        def hear(event: RunEvent) -> None:
            if event.type in TERMINAL_EVENTS:
                ended.set()

        services.run_events.listen(hear)
        await services.run_events.wait_subscribed()
        metrics = services.audit.metrics.registry
        await stages.timed(
            "validate", lambda: call_tool(client, "pipelines.validate", {"definition": pipeline})
        )
        submitted = await stages.timed(
            "submit", lambda: call_tool(client, "submit", {"definition": pipeline, "mode": "QueueFirst"})
        )
        run_id = submitted["shared_run_id"]
        await stages.timed("dispatch", lambda: call_tool(client, "queue.drain", {"max_count": 1}))
        await stages.timed("execute", lambda: asyncio.wait_for(ended.wait(), timeout=3600))
        retention_s = metrics.get_sample_value("mcprt_retention_decision_seconds_sum") or 0.0
        stages.add("retention (its passes, within execute)", retention_s)
        status = await stages.timed(
            "run.status first page", lambda: call_tool(client, "run.status", {"run_id": run_id})
        )
        execution_id = status["execution_id"]
        bytes_per_step = await _bytes(services, execution_id) / steps
        await stages.timed(
            "run.status every page", lambda: _every_page(client, run_id), redis_bytes_per_step=bytes_per_step
        )
        await stages.timed("run page", lambda: _run_page(services, run_id))
        sweeper = services.control_plane.parts.lifecycle.sweeper
        assert sweeper is not None
        await stages.timed("archive", sweeper.sweep_once)
    return stages.rows


async def _every_page(client: Client, run_id: str) -> int:
    cursor, pages = None, 0
    while True:
        arguments: dict[str, Any] = {"run_id": run_id, "steps_page_size": STATUS_PAGE}
        if cursor is not None:
            arguments["steps_cursor"] = cursor
        answer = await call_tool(client, "run.status", arguments)
        pages += 1
        cursor = answer.get("next_steps_cursor")
        if cursor is None:
            return pages


async def _run_page(services: RuntimeServices, run_id: str) -> str:
    reader = backend_of(services).run_view_reader()
    snapshot = ADMIN.snapshot("bench")
    graph = await reader.graph(run_id, snapshot)
    await reader.evidence(graph.run, snapshot)
    return run_app_html(graph)


async def _bytes(services: RuntimeServices, execution_id: str) -> int:
    redis = services.hot_state.redis
    keys = services.dag_store.keys(execution_id).all()
    return sum([int(await redis.memory_usage(key, samples=0) or 0) for key in keys])


async def run(redis_url: str, *, sizes: list[int], layers: int) -> list[Row]:
    rows: list[Row] = []
    limit = max(sizes)
    with tempfile.TemporaryDirectory(prefix="mcprt-bench-big-") as tmp:
        for steps in sizes:
            for label, pipeline in (
                (f"fan-out {steps:,}", fan_out(steps)),
                (f"layered {steps:,} ({layers} layers)", layered(steps, layers)),
            ):
                rows += await _one_run(
                    redis_url, Path(tmp) / label.split()[0] / str(steps), label, pipeline, limit
                )
    rows.append(
        Row(
            "big runs",
            "peak resident memory of the process",
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            extra={"max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024},
        )
    )
    return rows
