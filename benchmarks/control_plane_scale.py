"""The seed's heavy scenario: 50 shared runs x 100 steps, queue-first, drained by the
background pump, over 1 and 3 in-process runtime instances and over 3 pooled child
instances behind the HTTP and gRPC providers (one runtime-instance OS process each). Each
row also carries how many runs ran at once (sampled from the published capacity): with 4
run slots per instance, capacity that adds up shows 4 per instance."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import Row
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import HostLaunch, HostTransport, IsolationMode, LocalRunStatus
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.queueing import SubmitMode

TENANT = ExecutionContextSnapshot(user_id="bench", tenant_id="bench-tenant")
WORKERS = 8


def hundred_steps(steps: int) -> PipelineDefinition:
    body: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.noop"}]
    body += [{"name": f"s{i:03d}", "stepKey": "test.noop", "dependsOn": ["start"]} for i in range(steps - 2)]
    body.append(
        {"name": "join", "stepKey": "test.noop", "dependsOn": [f"s{i:03d}" for i in range(steps - 2)]}
    )
    return parse_pipeline({"name": f"heavy-{steps}", "steps": body})


async def _wait_all_completed(plane: ControlPlane, ids: list[str], timeout_s: float = 600) -> list[int]:
    """Until every run completed; the number of runs running at each poll."""
    deadline = time.monotonic() + timeout_s
    pending = list(ids)
    running: list[int] = []
    while pending:
        running.append(sum(entry.capacity.running for entry in await plane.parts.registry.entries()))
        record = await plane.parts.index.get_by_shared(pending[-1])
        if record is not None and record.status is LocalRunStatus.COMPLETED:
            pending.pop()
            continue
        if record is not None and record.status.is_terminal:
            raise RuntimeError(f"run {pending[-1]} ended {record.status}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pending)} runs not completed in {timeout_s}s")
        await _idle()
    return running


async def _idle() -> None:
    await asyncio.sleep(0.02)  # polling the index of runs executed by other tasks/processes


async def scenario(
    redis_url: str,
    variant: str,
    runs: int,
    steps: int,
    instances: int,
    transport: HostTransport | None,
    *,
    processes: int = 1,
) -> Row:
    """`instances` in-process instances, or `processes` runtime-instance processes hosting
    `instances` child instances each over `transport`."""
    with tempfile.TemporaryDirectory(prefix="mcprt-bench-scale-") as tmp:
        settings = RuntimeSettings(
            redis_url=redis_url,
            redis_prefix=f"bs{secrets.token_hex(3)}:",
            data_dir=Path(tmp),
            control_plane=ControlPlaneSettings(
                local_instances=0 if transport else instances,
                workers_per_instance=WORKERS,
                max_concurrent_runs_per_instance=4,
                pump_idle_interval_ms=10,
                heartbeat_interval_ms=200,
            ),
        )
        async with RuntimeServices(settings) as services:
            plane = services.control_plane
            for _ in range(processes if transport is not None else 0):
                assert plane.parts.hosts is not None
                await plane.parts.hosts.start_host(
                    HostLaunch(
                        transport=transport,
                        tenant_id=TENANT.tenant_id,
                        isolation_mode=IsolationMode.SHARED,
                        pool_size=instances,
                        worker_count=WORKERS,
                        max_concurrent_runs=4,
                    )
                )
            pipeline = hundred_steps(steps)
            started = time.perf_counter()
            ids = [
                (await plane.submit(pipeline, {"run": n}, SubmitMode.QUEUE_FIRST, TENANT)).shared_run_id
                for n in range(runs)
            ]
            running = await _wait_all_completed(plane, ids)
            seconds = time.perf_counter() - started
    total = runs * steps
    at_once = {"runs_at_once_max": max(running, default=0), "runs_at_once_mean": _mean(running)}
    return Row("heavy 50x100", variant, total, seconds, total / seconds, 0, 0, 0, 0, extra=at_once)


def _mean(values: list[int]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0


async def run(redis_url: str, *, runs: int, steps: int) -> list[Row]:
    one = await scenario(redis_url, f"{runs}x{steps}, 1 in-process instance", runs, steps, 1, None)
    rows = [one]
    for label, transport in (
        ("3 in-process instances", None),
        ("3 HTTP children", HostTransport.HTTP),
        ("3 gRPC children", HostTransport.GRPC),
    ):
        row = await scenario(redis_url, f"{runs}x{steps}, {label}", runs, steps, 3, transport)
        row.ratio, row.baseline = row.steps_per_s / one.steps_per_s, "1 instance"
        rows.append(row)
    return rows
