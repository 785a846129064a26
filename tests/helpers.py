"""Test helpers: condition waits with a timeout (never a bare sleep) and small builders."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio.cluster import RedisCluster

from runtime_core.hot_state import EmbeddedRedis, HotState, find_free_port
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.steps import StepInvocation


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, interval: float = 0.005
) -> None:
    """Poll `predicate` until it is true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


async def queue_clock_passed(hot_state: HotState, queue_clock_key: str) -> None:
    """Until the server clock is past the last sequence a shared-queue partition's clock gave
    (queue clocks count microseconds: runs queued after this are ordered after that one)."""
    last = int(await hot_state.redis.get(queue_clock_key) or 0)

    async def passed() -> bool:
        return await hot_state.server_time_ms() * 1000 > last

    await wait_until(passed, interval=0.001)


async def command_calls(hot_state: HotState, *stats: str) -> int:
    """Calls of the given `cmdstat_*` commands so far, summed over every master of a cluster."""
    redis = hot_state.redis
    nodes = redis.get_primaries() if isinstance(redis, RedisCluster) else [None]
    total = 0
    for node in nodes:
        info = await (redis.info("commandstats", target_nodes=node) if node else redis.info("commandstats"))
        total += sum(int(info.get(stat, {}).get("calls", 0)) for stat in stats)
    return total


class CountingExecutor:
    """A deterministic no-op that counts executions per (execution, step)."""

    def __init__(self, step_key: str = "test.count") -> None:
        self.step_key = step_key
        self.calls: Counter[tuple[str, str]] = Counter()
        self.active = 0
        self.max_active = 0

    async def execute(self, invocation: StepInvocation) -> Any:
        self.calls[(invocation.execution_id, invocation.step_name)] += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(0)  # yield so concurrent workers really interleave
            return {"data": {"step": invocation.step_name, "inputs": invocation.inputs}}
        finally:
            self.active -= 1


def restart_empty(server: EmbeddedRedis) -> EmbeddedRedis:
    """SIGKILL, then a new redis-server on the same port and directory: nothing persisted."""
    server.kill()
    return EmbeddedRedis(server.data_dir, port=server.port, appendonly=False).start()


def fan_out_pipeline(width: int, step_key: str = "test.noop", name: str = "fan") -> PipelineDefinition:
    steps: list[dict[str, Any]] = [{"name": "start", "stepKey": step_key}]
    steps += [{"name": f"b{i:04d}", "stepKey": step_key, "dependsOn": ["start"]} for i in range(width)]
    steps.append({"name": "join", "stepKey": step_key, "dependsOn": [f"b{i:04d}" for i in range(width)]})
    return parse_pipeline({"name": name, "steps": steps})


def runtime_instance_argv(redis_url: str, data_dir: str, host_id: str) -> list[str]:
    """`runtime-instance` arguments for one tenant-a HTTP process on a free port and its own prefix."""
    return [
        "runtime-instance",
        "--transport",
        "http",
        "--port",
        str(find_free_port()),
        "--tenant",
        "tenant-a",
        "--redis-url",
        redis_url,
        "--redis-prefix",
        f"cli{secrets.token_hex(3)}:",
        "--data-dir",
        data_dir,
        "--host-id",
        host_id,
    ]
