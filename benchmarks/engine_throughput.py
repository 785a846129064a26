"""Engine throughput: no-op steps per second against the Redis floor measured in the same run.

Two floors do only the Redis work steps minimally need, with no executor, bindings or
observers, same script, key layout and client: unbatched, one claim and one completion
call per step; batched, one `advance_steps` call per round that completes the previous
32 claimed steps and claims the next 32. Our engine is reported as a ratio of the batched
floor (the engine batches the same way when steps are fast).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from benchmarks._harness import RoundTripCounter, Row, counting_hot_state, percentile, script_calls
from runtime_core.dag import DagEngine, DagStore, EngineEvent, EngineSettings
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.steps import default_executor_registry

T = TypeVar("T")
SNAPSHOT = ExecutionContextSnapshot(user_id="bench", tenant_id="bench")


def fan_out(width: int, branch_config: dict[str, Any] | None = None) -> PipelineDefinition:
    """start -> `width` branches -> join, every step `test.noop` (the branches with `branch_config`)."""
    steps: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.noop"}]
    branch: dict[str, Any] = {"stepKey": "test.noop", "dependsOn": ["start"]}
    if branch_config:
        branch["config"] = branch_config
    steps += [{"name": f"b{i:05d}", **branch} for i in range(width)]
    steps.append({"name": "join", "stepKey": "test.noop", "dependsOn": [f"b{i:05d}" for i in range(width)]})
    return parse_pipeline({"name": f"fan-{width}", "steps": steps})


class LatencyObserver:
    """Claim-to-complete latency per step, from the engine's own events."""

    def __init__(self) -> None:
        self.claimed: dict[tuple[str, str], float] = {}
        self.latencies_ms: list[float] = []

    async def on_event(self, event: EngineEvent) -> None:
        key = (event.execution_id, event.step_name or "")
        if event.name == "step.claimed":
            self.claimed[key] = time.perf_counter()
        elif event.name == "step.completed" and key in self.claimed:
            self.latencies_ms.append((time.perf_counter() - self.claimed.pop(key)) * 1000)


async def engine_run(
    redis_url: str,
    pipeline: PipelineDefinition,
    workers: int,
    executions: int = 1,
    *,
    name: str = "engine",
    prepare: Callable[[DagEngine], None] | None = None,
) -> Row:
    """`prepare` adjusts the engine before the run (e.g. attaches tracing)."""
    hot = counting_hot_state(redis_url, prefix=f"be{secrets.token_hex(3)}:")
    observer = LatencyObserver()
    engine = DagEngine(
        DagStore(hot),
        default_executor_registry(),
        RetryEngine(),
        observer=observer,
        settings=EngineSettings(),
    )
    if prepare is not None:
        prepare(engine)
    try:
        ids = [await engine.create_execution(pipeline, {}, SNAPSHOT) for _ in range(executions)]
        cost, statuses = await _measured(
            hot, asyncio.gather(*(engine.run(eid, workers=workers) for eid in ids))
        )
        assert set(statuses) == {"Completed"}, statuses
    finally:
        await hot.close()
    return _row(name, pipeline, executions, workers, cost, observer.latencies_ms)


FLOOR_BATCH = 32


async def batched_floor_run(redis_url: str, pipeline: PipelineDefinition, workers: int) -> Row:
    """Per round trip: complete the previous batch and claim the next one (`advance`)."""
    hot = counting_hot_state(redis_url, prefix=f"bb{secrets.token_hex(3)}:")
    store = DagStore(hot)
    execution_id = f"exec_floorb{secrets.token_hex(4)}"

    async def loop(n: int) -> None:
        done: list = []
        while True:
            advanced = await store.advance(
                execution_id, done, max_claim=FLOOR_BATCH, lease_ms=60_000, token_prefix=f"b{n}"
            )
            done = [(claim, {"data": {"step": claim.step_name}}) for claim in advanced.claims.claims]
            if advanced.converged:
                return
            if not done:
                if not await hot.redis.zcard(store.keys(execution_id).running):
                    return
                await asyncio.sleep(0)

    try:
        await store.create_execution(execution_id, pipeline, {}, SNAPSHOT)
        cost, _ = await _measured(hot, asyncio.gather(*(loop(n) for n in range(workers))))
    finally:
        await hot.close()
    return _row("floor batched", pipeline, 1, workers, cost, [])


async def floor_run(redis_url: str, pipeline: PipelineDefinition, workers: int, executions: int = 1) -> Row:
    hot = counting_hot_state(redis_url, prefix=f"bf{secrets.token_hex(3)}:")
    store = DagStore(hot)
    latencies: list[float] = []

    async def loop(execution_id: str, n: int) -> None:
        while True:
            batch = await store.claim_ready_steps(
                execution_id, max_steps=1, lease_ms=60_000, worker_id=f"f{n}", token_prefix=f"f{n}"
            )
            if not batch.claims:
                if batch.next_eligible_ms is None and not await hot.redis.zcard(
                    store.keys(execution_id).running
                ):
                    return
                await asyncio.sleep(0)
                continue
            started = time.perf_counter()
            result = await store.complete_step(batch.claims[0], {"data": {"step": batch.claims[0].step_name}})
            latencies.append((time.perf_counter() - started) * 1000)
            if result.converged:
                return

    try:
        ids = [f"exec_floor{secrets.token_hex(4)}" for _ in range(executions)]
        for eid in ids:
            await store.create_execution(eid, pipeline, {}, SNAPSHOT)
        cost, _ = await _measured(hot, asyncio.gather(*(loop(eid, n) for eid in ids for n in range(workers))))
    finally:
        await hot.close()
    return _row("floor", pipeline, executions, workers, cost, latencies)


@dataclass(frozen=True)
class _Cost:
    seconds: float
    round_trips: int
    script_calls: int


async def _measured(hot: HotState, work: Awaitable[T]) -> tuple[_Cost, T]:
    """Wall time, client round trips and EVALSHA calls spent awaiting `work`."""
    before, sends = await script_calls(hot.redis), RoundTripCounter.sends
    started = time.perf_counter()
    result = await work
    seconds = time.perf_counter() - started
    round_trips = RoundTripCounter.sends - sends
    return _Cost(seconds, round_trips, await script_calls(hot.redis) - before), result


def _row(
    name: str,
    pipeline: PipelineDefinition,
    executions: int,
    workers: int,
    cost: _Cost,
    latencies_ms: list[float],
) -> Row:
    steps = len(pipeline.steps) * executions
    return Row(
        name,
        f"{executions}x{len(pipeline.steps)} steps, {workers} workers",
        steps,
        cost.seconds,
        steps / cost.seconds,
        cost.round_trips / steps,
        cost.script_calls / steps,
        percentile(latencies_ms, 50),
        percentile(latencies_ms, 99),
    )


async def run(redis_url: str, *, width: int, worker_counts: list[int]) -> list[Row]:
    rows: list[Row] = []
    pipeline = fan_out(width)
    for workers in worker_counts:
        floor = await floor_run(redis_url, pipeline, workers)
        batched = await batched_floor_run(redis_url, pipeline, workers)
        ours = await engine_run(redis_url, pipeline, workers)
        batched.ratio, batched.baseline = batched.steps_per_s / floor.steps_per_s, "floor"
        ours.ratio, ours.baseline = ours.steps_per_s / batched.steps_per_s, "floor batched"
        rows += [floor, batched, ours]
    return rows
