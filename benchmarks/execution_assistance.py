"""Execution assistance: one wide fan-out run on one runtime-instance process, and the same run
assisted by a second one (issue 28.1).

A control plane in this process (no local instances) starts N gRPC runtime-instance processes
through its host manager (each `WORKERS` workers, MaxLocalWorkersPerExecution = `WORKERS`) and
waits until they are registered and idle; then the timed part: one fan-out run of `width`
`test.noop` steps submitted with DirectDispatch, from the submit until its local run is
Completed. With N = 2 the run lands on one process and the other one's idle workers join its
ExecutionId under an assistance lease and complete part of its steps. The row of N = 2 is a
ratio of N = 1 (the speed-up) and carries how many steps the assistant completed. Each row
also carries the CPU seconds its runtime-instance processes spent on the run (from /proc): on
a machine other work keeps busy, wall time says little, while the CPU the same run costs with
and without assistance (and how it splits between the processes) still does; and the CPU of
the control plane (this process) and of the Redis server (run alone), which share the same
2 cores: one process's run already keeps more than one core busy.

Two kinds of steps: bare `test.noop` steps (all CPU: the instance's and the Redis server's)
and steps waiting `--wait-ms` like a call to a peer (a model, a database) does. Assistance
adds workers; a no-op run is bounded by the machine's cores instead: with per-step CPU c in
an instance process, r in Redis and x of assistance's own, two processes on 2 cores reach at
most 2c / (c + x + r), since one process had Redis on the other core for free.

`python -m benchmarks.execution_assistance [--width 9000] [--wait-ms 2]` runs it alone on a
private redis-server and prints the ratios first, with the machine's load average (the
figures are only worth comparing on a quiet machine), then the no-op fan-out split by hand
between bare engine processes (`process_scaling`): what two processes can gain on this
machine at best for steps that cost only CPU, since the Redis server shares its cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import tempfile
import time
from pathlib import Path

from benchmarks._harness import Row, machine_note, print_table, private_redis
from benchmarks.engine_throughput import fan_out
from benchmarks.process_scaling import fan_out_rows
from runtime_core.assistance import assistant_records
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import HostLaunch, HostTransport, IsolationMode, LocalRunStatus
from runtime_core.queueing import SubmitMode
from runtime_core.storage import DurableStoreSettings

TENANT = ExecutionContextSnapshot(user_id="bench", tenant_id="bench-tenant")
WORKERS = 4
TIMEOUT_S = 600
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


async def _completed(plane: ControlPlane, shared_run_id: str) -> str:
    """Until the run's local run ended; its ExecutionId."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        record = await plane.parts.index.get_by_shared(shared_run_id)
        if record is not None and record.status.is_terminal:
            if record.status is not LocalRunStatus.COMPLETED or record.execution_id is None:
                raise RuntimeError(f"run {shared_run_id} ended {record.status}: {record.failure_reason}")
            return record.execution_id
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {shared_run_id} not completed in {TIMEOUT_S}s")
        await asyncio.sleep(0.02)  # polling the index of a run executed by other processes


async def scenario(
    redis_url: str, width: int, processes: int, redis_pid: int | None = None, wait_ms: float = 0
) -> Row:
    with tempfile.TemporaryDirectory(prefix="mcprt-bench-assist-") as tmp:
        settings = RuntimeSettings(
            redis_url=redis_url,
            redis_prefix=f"ba{secrets.token_hex(3)}:",
            data_dir=Path(tmp),
            durable=DurableStoreSettings.from_env(),  # the children read the same variables
            control_plane=ControlPlaneSettings(
                local_instances=0, background_pump=False, scale_out_enabled=False
            ),
        )
        async with RuntimeServices(settings) as services:
            plane = services.control_plane
            assert plane.parts.hosts is not None
            hosts = [
                await plane.parts.hosts.start_host(
                    HostLaunch(
                        transport=HostTransport.GRPC,
                        tenant_id=TENANT.tenant_id,
                        isolation_mode=IsolationMode.SHARED,
                        worker_count=WORKERS,
                        max_local_workers_per_execution=WORKERS,
                    )
                )
                for _ in range(processes)
            ]
            pipeline = fan_out(width, {"waitMs": wait_ms} if wait_ms else None)
            cpu_before = [_cpu_s(hosted.pid) for hosted in hosts]
            others_before = (time.process_time(), _cpu_s(redis_pid) if redis_pid else 0.0)
            started = time.perf_counter()
            submitted = await plane.submit(pipeline, {}, SubmitMode.DIRECT_DISPATCH, TENANT)
            execution_id = await _completed(plane, submitted.shared_run_id)
            seconds = time.perf_counter() - started
            cpu = [_cpu_s(hosted.pid) - before for hosted, before in zip(hosts, cpu_before, strict=True)]
            plane_cpu = time.process_time() - others_before[0]
            redis_cpu = (_cpu_s(redis_pid) if redis_pid else 0.0) - others_before[1]
            meta = await plane.parts.dag_store.load_meta(execution_id)
            assistants = assistant_records(meta.attributes) if meta is not None else []
    steps = len(pipeline.steps)
    plural = "es" if processes > 1 else ""
    kind = f"steps waiting {wait_ms:g} ms" if wait_ms else "no-op steps"
    label = f"1x{steps} {kind}, {processes} gRPC runtime-instance process{plural} x {WORKERS} workers"
    extra = {"cpu_ms": round(1000 * sum(cpu)), "busiest_process_cpu_ms": round(1000 * max(cpu))}
    if processes > 1:
        extra["assistant_steps"] = sum(a.steps_completed for a in assistants)
    # What else the run cost the machine's 2 cores: this process (the control plane, and its
    # polling for the end) and the Redis server (when it is this benchmark's own).
    extra["control_plane_cpu_ms"] = round(1000 * plane_cpu)
    if redis_pid:
        extra["redis_cpu_ms"] = round(1000 * redis_cpu)
    return Row("assisted fan-out", label, steps, seconds, steps / seconds, 0, 0, 0, 0, extra=extra)


async def run(redis_url: str, *, width: int, redis_pid: int | None = None, wait_ms: float = 0) -> list[Row]:
    one = await scenario(redis_url, width, 1, redis_pid, wait_ms)
    two = await scenario(redis_url, width, 2, redis_pid, wait_ms)
    two.ratio, two.baseline = two.steps_per_s / one.steps_per_s, "1 process"
    return [one, two]


def _load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


async def _alone(width: int, wait_ms: float) -> None:
    with private_redis() as server:
        before = _load()
        waiting = await run(server.url, width=width, redis_pid=server.pid, wait_ms=wait_ms)
        bare = await run(server.url, width=width, redis_pid=server.pid)
        by_hand = await fan_out_rows(server.url, width)
    waiting_ratio, ratio, hand = waiting[1].ratio or 0.0, bare[1].ratio or 0.0, by_hand[1].ratio or 0.0
    print(
        f"assisted by a second process / one process, steps waiting {wait_ms:g} ms on a peer: "
        f"{waiting_ratio:.2f}x ({before} before, {_load()} after)"
    )
    print(f"the same, no-op steps (CPU only, Redis sharing the cores): {ratio:.2f}x")
    print(
        f"bare engine processes splitting the no-op fan-out by hand, 2 / 1: {hand:.2f}x "
        f"(assistance reaches {ratio / hand:.0%} of it)"
    )
    print(f"machine: {machine_note()}")
    print_table([*waiting, *bare, *by_hand])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.execution_assistance")
    parser.add_argument("--width", type=int, default=9_000)
    parser.add_argument(
        "--wait-ms", type=float, default=2.0, help="how long each step of the waiting run waits"
    )
    arguments = parser.parse_args()
    asyncio.run(_alone(arguments.width, arguments.wait_ms))


if __name__ == "__main__":
    main()
