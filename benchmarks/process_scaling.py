"""Scale on one machine: the same work with 1 and with 2 runtime processes (one per core).

- fan-out: one wide fan-out execution advanced by N engine OS processes at once (the
  engine is stateless: processes cooperate only through Redis). Each child imports, connects
  and creates its engine first, then waits for a go line on stdin, so the timed part is the
  work alone: from the go until the last process returns.
- heavy: the seed's heavy scenario (queue-first shared runs x 100 steps, drained by the
  background pump) on N runtime-instance processes started by the host manager (gRPC
  provider, one child instance each, `--workers` each).
Rows report the N=2 run as a ratio of the N=1 run (the speed-up).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time

from benchmarks._harness import Row
from benchmarks.control_plane_scale import scenario as heavy_scenario
from benchmarks.engine_throughput import SNAPSHOT, fan_out
from runtime_core.dag import DagEngine, DagStore
from runtime_core.hot_state import connect_hot_state
from runtime_core.instances import HostTransport
from runtime_core.policy import RetryEngine
from runtime_core.steps import default_executor_registry

ENGINE_WORKERS = 4
_CHILD = """
import asyncio, sys, time
from runtime_core.dag import DagEngine, DagStore
from runtime_core.hot_state import connect_hot_state
from runtime_core.policy import RetryEngine
from runtime_core.steps import default_executor_registry

async def main(url, prefix, execution_id, workers):
    hot = connect_hot_state(url, prefix=prefix)
    engine = DagEngine(DagStore(hot), default_executor_registry(), RetryEngine(), instance_id=prefix)
    await hot.ping()
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    status = await engine.run(execution_id, workers=workers)
    print(status, time.time(), flush=True)
    await hot.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


async def _fan_out_with(redis_url: str, width: int, processes: int) -> Row:
    prefix = f"ps{secrets.token_hex(3)}:"
    hot = connect_hot_state(redis_url, prefix=prefix)
    engine = DagEngine(DagStore(hot), default_executor_registry(), RetryEngine())
    pipeline = fan_out(width)
    execution_id = await engine.create_execution(pipeline, {}, SNAPSHOT)
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            redis_url,
            prefix,
            execution_id,
            str(ENGINE_WORKERS),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None and (await child.stdout.readline()).strip() == b"ready"
        started = time.time()
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            await child.stdin.drain()
        finished = [(await child.communicate())[0].split() for child in children]
    finally:
        await hot.close()
    assert all(line[0] == b"Completed" for line in finished), finished
    seconds = max(float(line[1]) for line in finished) - started
    steps = len(pipeline.steps)
    plural = "es" if processes > 1 else ""
    label = f"1x{steps} steps, {processes} engine process{plural} x {ENGINE_WORKERS} workers"
    return Row("scaling fan-out", label, steps, seconds, steps / seconds, 0, 0, 0, 0)


async def fan_out_rows(redis_url: str, width: int) -> list[Row]:
    """The fan-out on 1, then 2 bare engine processes splitting it (the second row's ratio: the
    speed-up two processes get on this machine when nothing but the engine runs)."""
    one = await _fan_out_with(redis_url, width, 1)
    two = await _fan_out_with(redis_url, width, 2)
    two.ratio, two.baseline = two.steps_per_s / one.steps_per_s, "1 process"
    return [one, two]


async def run(redis_url: str, *, width: int, runs: int, steps: int) -> list[Row]:
    rows = await fan_out_rows(redis_url, width)
    heavy_one, heavy_two = [
        await heavy_scenario(
            redis_url,
            f"{runs}x{steps}, {n} gRPC runtime-instance process{'es' if n > 1 else ''}",
            runs,
            steps,
            1,
            HostTransport.GRPC,
            processes=n,
        )
        for n in (1, 2)
    ]
    heavy_two.ratio, heavy_two.baseline = heavy_two.steps_per_s / heavy_one.steps_per_s, "1 process"
    for row in (heavy_one, heavy_two):
        row.benchmark = "scaling heavy"
    return [*rows, heavy_one, heavy_two]
