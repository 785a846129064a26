"""Issue 13.1, 13.3, 13.4, 13.5: `mcp-runtime serve` is killed (SIGKILL) or stopped (SIGTERM)
mid-drain and started again on the same Redis and data directory: nothing is lost, nothing
runs twice, and `done` never lies.

Each scenario serves a real `mcp-runtime serve --transport http` child process (one
in-process runtime instance, background pump) and submits 100 runs of a 3-step pipeline
over MCP. The first 30 runs pass a gate at once; the other 70 wait at it, so when the
server is stopped after the first 30 completed, up to 4 executions are in flight (their
first step done, the gate step running), up to 4 more are in the instance's local queue or
mid-dispatch, and the rest are queued. The server starts again, the gate opens, and every
run must end Completed within a bound, with one ExecutionId per run and each step completed
once (ledger), while every run.status answer seen before, during and after the restart says
`done` only for a run whose shared run is dispatched to a local run whose execution ended
(and never takes it back). Scenarios: external redis-server with AOF + SIGKILL, the same +
SIGTERM, and the embedded default + SIGKILL (its redis-server survives the kill and is
adopted: never two servers on one directory).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from runtime_core.hot_state import EmbeddedRedis, connect_hot_state
from runtime_core.storage import SQLITE_FILE_NAME
from tests.e2e.mcp_support import clean_environment, processes_working_in
from tests.reliability.restart_support import (
    DoneWatch,
    McpSession,
    ServedControlPlane,
    executions_per_shared_run,
    gated_pipeline,
    served,
    step_completions,
)

RUNS = 100
OPEN_AT_ONCE = 30
DRAIN_BOUND_S = 120.0
PIPELINE = gated_pipeline("restart-gated")


def _open(gate: Path) -> None:
    gate.write_text("open", encoding="utf-8")


async def _submit_all(client: McpSession, open_gate: Path, closed_gate: Path) -> list[str]:
    run_ids = []
    for n in range(RUNS):
        gate = open_gate if n < OPEN_AT_ONCE else closed_gate
        submitted = await client.call(
            "submit", {"definition": PIPELINE, "input": {"gate": str(gate), "n": n}}
        )
        run_ids.append(submitted["shared_run_id"])
    return run_ids


async def _until_done(
    count: int, client: McpSession, watch: DoneWatch, run_ids: list[str], timeout_s: float
) -> None:
    """Sweep run.status (feeding the watch) until `count` runs are done."""
    deadline = time.monotonic() + timeout_s
    while await watch.sweep(client, run_ids) < count:
        if time.monotonic() > deadline:
            missing = sorted(set(run_ids) - set(watch.first_done))
            raise AssertionError(f"{len(missing)} runs not done within {timeout_s}s: {missing[:10]}")
        await asyncio.sleep(0.3)  # polling another process's progress


async def _first_life(plane: ServedControlPlane, gates: tuple[Path, Path], watch: DoneWatch) -> list[str]:
    plane.start()
    async with McpSession(plane.base_url) as client:
        run_ids = await _submit_all(client, *gates)
        await _until_done(OPEN_AT_ONCE, client, watch, run_ids, DRAIN_BOUND_S)
    return run_ids


async def _second_life(
    plane: ServedControlPlane, closed_gate: Path, watch: DoneWatch, run_ids: list[str]
) -> dict[str, dict[str, Any]]:
    plane.start()
    _open(closed_gate)
    async with McpSession(plane.base_url) as client:
        await client.call("queue.drain", {"max_count": RUNS})
        await _until_done(RUNS, client, watch, run_ids, DRAIN_BOUND_S)
        return await watch.statuses(client, run_ids)


async def _assert_one_execution_per_run(redis_url: str, prefix: str, run_ids: list[str]) -> None:
    hot_state = connect_hot_state(redis_url, prefix=prefix)
    try:
        executions = await executions_per_shared_run(hot_state)
    finally:
        await hot_state.close()
    twice = {run: ids for run, ids in executions.items() if len(ids) > 1}
    assert twice == {}, f"runs with two ExecutionIds: {twice}"
    assert set(run_ids) <= set(executions), "a run has no execution"


async def _assert_each_step_completed_once(data_dir: Path, statuses: dict[str, dict[str, Any]]) -> None:
    execution_ids = [status["execution_id"] for status in statuses.values()]
    completions = await step_completions(data_dir / SQLITE_FILE_NAME, execution_ids)
    twice = {key: count for key, count in completions.items() if count > 1}
    assert twice == {}, f"steps completed more than once: {twice}"


async def _first_half(plane: ServedControlPlane, tmp_path: Path, watch: DoneWatch) -> tuple[list[str], Path]:
    open_gate, closed_gate = tmp_path / "open-gate", tmp_path / "closed-gate"
    _open(open_gate)
    return await _first_life(plane, (open_gate, closed_gate), watch), closed_gate


async def _second_half(
    plane: ServedControlPlane,
    closed_gate: Path,
    watch: DoneWatch,
    run_ids: list[str],
    redis_url: str,
    prefix: str,
) -> None:
    statuses = await _second_life(plane, closed_gate, watch, run_ids)
    assert watch.violations == []
    assert all(s["execution_status"] == s["local_status"] == "Completed" for s in statuses.values())
    await _assert_one_execution_per_run(redis_url, prefix, run_ids)
    plane.end("term")
    await _assert_each_step_completed_once(plane.data_dir, statuses)


@pytest.fixture
def aof_redis(tmp_path: Path) -> Any:
    server = EmbeddedRedis(tmp_path / "external-redis", appendonly=True).start()
    yield server
    server.stop()


@pytest.mark.parametrize("how", ["kill", "term"])
async def test_a_restarted_control_plane_on_external_aof_redis_loses_nothing_and_runs_nothing_twice(
    aof_redis: EmbeddedRedis, tmp_path: Path, how: str
) -> None:
    prefix = f"restart{secrets.token_hex(4)}:"
    env = clean_environment(REDIS_URL=aof_redis.url, MCP_RUNTIME_REDIS_PREFIX=prefix)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    watch = DoneWatch()
    with served(data_dir, env) as plane:
        run_ids, closed_gate = await _first_half(plane, tmp_path, watch)
        plane.end(how)
        await _second_half(plane, closed_gate, watch, run_ids, aof_redis.url, prefix)


def _embedded_url(redis_dir: Path) -> str:
    state = json.loads((redis_dir / "embedded-redis.json").read_text(encoding="utf-8"))
    return f"redis://127.0.0.1:{state['port']}/0"


async def test_a_killed_embedded_control_plane_restarts_on_its_surviving_redis_and_loses_nothing(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    redis_dir, watch = data_dir / "redis", DoneWatch()
    with served(data_dir, clean_environment()) as plane:
        try:
            run_ids, closed_gate = await _first_half(plane, tmp_path, watch)
            plane.end("kill")
            survivors = processes_working_in(redis_dir)
            assert len(survivors) == 1, "the killed server's redis-server survives it"
            url = _embedded_url(redis_dir)
            plane.start_hook = lambda: processes_working_in(redis_dir)
            await _second_half(plane, closed_gate, watch, run_ids, url, "mcprt:")
            assert plane.seen_after_start == [survivors], "the survivor is adopted: never two servers"
            assert processes_working_in(redis_dir) == [], "the adopted redis-server stops with its owner"
        finally:
            for pid in processes_working_in(redis_dir):
                os.kill(pid, signal.SIGKILL)
