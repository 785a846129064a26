"""Cost growth: Redis memory per active execution, per 1,000 completed steps with and
without retention, and the time to recover 100 in-flight executions after a runtime
instance dies (health window included)."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import Row
from runtime_core.bootstrap import EngineServices, RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import LocalRunStatus
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.steps import StepInvocation

TENANT = ExecutionContextSnapshot(user_id="bench", tenant_id="bench-tenant")
RESULT_BYTES = 4096
HYBRID = {"policies": ["retention.hybrid.default"], "triggers": {"completedSteps": 50}}


class PayloadExecutor:
    """`bench.payload`: a deterministic result of RESULT_BYTES characters."""

    step_key = "bench.payload"

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        return {"data": {"step": invocation.step_name, "blob": invocation.step_name[-1] * RESULT_BYTES}}


class HeldExecutor:
    """`bench.held`: blocks until released (keeps executions in flight for the crash)."""

    step_key = "bench.held"

    def __init__(self, expected: int) -> None:
        self.release = asyncio.Event()
        self.all_started = asyncio.Event()
        self.expected = expected
        self.started = 0

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.started += 1
        if self.started >= self.expected:
            self.all_started.set()
        await self.release.wait()
        return {"data": {"step": invocation.step_name}}


def lanes(steps: int, step_key: str, retention: dict[str, Any] | None) -> PipelineDefinition:
    body = [
        {
            "name": f"l{i % 10}s{i // 10:04d}",
            "stepKey": step_key,
            "dependsOn": [f"l{i % 10}s{i // 10 - 1:04d}"] if i >= 10 else [],
        }
        for i in range(steps)
    ]
    config = {"retention": retention} if retention else {}
    return parse_pipeline({"name": "lanes", "config": config, "steps": body})


async def memory_of(hot: HotState, pattern: str) -> int:
    total = 0
    async for key in hot.redis.scan_iter(match=pattern, count=1000):
        total += int(await hot.redis.memory_usage(key, samples=0) or 0)
    return total


def _settings(redis_url: str, data_dir: Path, **control: Any) -> RuntimeSettings:
    return RuntimeSettings(
        redis_url=redis_url,
        redis_prefix=f"bc{secrets.token_hex(3)}:",
        data_dir=data_dir,
        control_plane=ControlPlaneSettings(**control),
    )


async def memory_rows(redis_url: str, data_dir: Path, executions: int, steps: int) -> list[Row]:
    rows = []
    async with EngineServices(_settings(redis_url, data_dir / "idle")) as services:
        services.executors.register(PayloadExecutor())
        for _ in range(executions):
            await services.engine.create_execution(lanes(100, "test.noop", None), {}, TENANT)
        per_execution = (
            await memory_of(services.hot_state, f"{services.hot_state.prefix}{{exec_*") / executions
        )
        rows.append(
            Row(
                "cost",
                f"Redis bytes per active 100-step execution ({executions} created)",
                executions,
                0,
                0,
                0,
                0,
                0,
                0,
                extra={"bytes": per_execution},
            )
        )
    for label, retention in (("without retention", None), ("with hybrid retention", HYBRID)):
        async with EngineServices(_settings(redis_url, data_dir / label.replace(" ", "-"))) as services:
            services.executors.register(PayloadExecutor())
            eid = await services.engine.create_execution(lanes(steps, "bench.payload", retention), {}, TENANT)
            assert await services.engine.run(eid, workers=4) == "Completed"
            used = await memory_of(services.hot_state, f"{services.hot_state.prefix}{{{eid}}}*")
            rows.append(
                Row(
                    "cost",
                    f"Redis bytes per 1,000 completed {RESULT_BYTES} B steps, {label}",
                    steps,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    extra={"bytes": used * 1000 / steps},
                )
            )
    return rows


async def recovery_row(redis_url: str, data_dir: Path, in_flight: int) -> Row:
    held = HeldExecutor(in_flight)
    settings = _settings(
        redis_url,
        data_dir / "recovery",
        local_instances=1,
        workers_per_instance=in_flight,
        max_local_workers_per_execution=1,
        max_concurrent_runs_per_instance=in_flight,
        local_queue_capacity=in_flight * 2,
        heartbeat_interval_ms=100,
        health_window_ms=1000,
        health_check_interval_ms=100,
        recovery_interval_ms=100,
        pump_idle_interval_ms=10,
    )
    pipeline = parse_pipeline(
        {
            "name": "held",
            "steps": [
                {"name": "first", "stepKey": "test.noop"},
                {"name": "hold", "stepKey": "bench.held", "dependsOn": ["first"]},
            ],
        }
    )
    async with RuntimeServices(settings) as services:
        services.executors.register(held)
        plane = services.control_plane
        ids = [
            (await plane.submit(pipeline, {"n": n}, SubmitMode.QUEUE_FIRST, TENANT)).shared_run_id
            for n in range(in_flight)
        ]
        await asyncio.wait_for(held.all_started.wait(), timeout=120)  # every execution is in flight
        [victim] = plane.parts.pool.instances()
        await victim.stop(unregister=False)  # dies like a killed process: registry, index and DAGs stay
        crashed_at = time.perf_counter()
        await plane.parts.pool.start_instance(plane.local_instance_settings(2))
        held.release.set()
        pending = list(ids)
        while pending:
            record = await plane.parts.index.get_by_shared(pending[-1])
            if record is not None and record.status is LocalRunStatus.COMPLETED:
                pending.pop()
            else:
                await asyncio.sleep(0.01)  # polling runs executed by the replacement instance
        seconds = time.perf_counter() - crashed_at
    return Row(
        "cost",
        f"recover {in_flight} in-flight executions after an instance death (1 s health window)",
        in_flight,
        seconds,
        in_flight / seconds,
        0,
        0,
        0,
        0,
        extra={"seconds": seconds},
    )


async def run(redis_url: str, *, executions: int, steps: int, in_flight: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mcprt-bench-cost-") as tmp:
        rows = await memory_rows(redis_url, Path(tmp), executions, steps)
        rows.append(await recovery_row(redis_url, Path(tmp), in_flight))
    return rows
