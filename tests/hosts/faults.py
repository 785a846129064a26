"""What the scenarios observe and force on the data centre, from the client host.

Owns reading which runs a runtime host holds (the run index in Redis), waiting for an
instance's health verdict or a host's readiness, a gate file that holds gated runs at their
gate step, and placing queued runs in a full instance's local queue the way the dispatcher
does after admission (admission would not offer a full instance: only a run dispatched as
its last slot frees, then found queued, is ever in a local queue, so the kill scenario puts
some there). Must not assert a scenario's outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_core.instances import (
    DISPATCH_ATTEMPT_KEY,
    InstanceHealth,
    InstanceRegistry,
    LocalRunStatus,
    RunExecutionIndex,
    RunIndexRecord,
    TenantSettingsCatalog,
)
from runtime_core.providers import DispatchRequest, GrpcRuntimeProvider, HttpRuntimeProvider
from runtime_core.queueing import PumpIdentity, SharedQueue, SharedRunStore
from tests.hosts.datacentre import RUNTIME_HOSTS, DataCentre
from tests.hosts.workload import Acknowledged

WAIT_TIMEOUT_S = 60.0


async def wait_for(
    condition: Callable[[], Awaitable[bool]], what: str, timeout_s: float = WAIT_TIMEOUT_S
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        await asyncio.sleep(0.05)  # polling other hosts' state: there is no event to wait on


async def readiness_until(dc: DataCentre, plane: str, *, ready: bool) -> dict[str, Any]:
    """A control plane's /readyz body once it answers ready (200), or not ready (anything else)."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        status, body = await dc.readiness(plane)
        seen.update(body)
        return (status == 200) is ready

    await wait_for(reached, f"{plane} {'ready' if ready else 'not ready'}")
    return seen


def instance_id(host: str) -> str:
    return f"rt_{host}:{host}-1"


@dataclass(frozen=True)
class Gate:
    """A file the gated runs wait for (every host shares this filesystem)."""

    path: Path

    def input(self) -> dict[str, str]:
        return {"gate": str(self.path)}

    def open(self) -> None:
        self.path.write_text("open", encoding="utf-8")


async def index_of(dc: DataCentre, runs: list[Acknowledged]) -> dict[str, RunIndexRecord]:
    """The run index record of every run that has one (its current local run), by shared run id."""
    assert dc.hot_state is not None
    index = RunExecutionIndex(dc.hot_state)
    found = {}
    for run in runs:
        record = await index.get_by_shared(run.shared_run_id)
        if record is not None:
            found[run.shared_run_id] = record
    return found


async def held_by(dc: DataCentre, host: str, runs: list[Acknowledged]) -> dict[str, RunIndexRecord]:
    """The runs whose current local run is queued or running on `host`'s instance."""
    live = (LocalRunStatus.QUEUED, LocalRunStatus.RUNNING)
    return {
        shared: record
        for shared, record in (await index_of(dc, runs)).items()
        if record.runtime_instance_id == instance_id(host) and record.status in live
    }


async def health_of(dc: DataCentre, host: str) -> tuple[InstanceHealth, int]:
    """The instance's health and when it was marked Unsafe (Redis ms, 0 when never)."""
    assert dc.hot_state is not None
    registry = InstanceRegistry(dc.hot_state, TenantSettingsCatalog())
    health, unsafe_at = await dc.hot_state.redis.hmget(
        registry.keys(instance_id(host)).registry, ["health", "unsafe_at_ms"]
    )
    return InstanceHealth(health or InstanceHealth.HEALTHY), int(unsafe_at or 0)


async def running_at_capacity(
    dc: DataCentre, runs: list[Acknowledged]
) -> dict[str, dict[str, RunIndexRecord]]:
    """Once every runtime host runs as many runs as it has slots: what each one holds."""
    held: dict[str, dict[str, RunIndexRecord]] = {}

    async def full() -> bool:
        entries = await dc.instances()
        for host in RUNTIME_HOSTS:
            held[host] = await held_by(dc, host, runs)
        return all(
            e.capacity.running == e.capacity.max_concurrent_runs
            for h, e in entries.items()
            if h in RUNTIME_HOSTS
        )

    await wait_for(full, "every runtime host runs a full set of runs")
    return held


async def place_in_local_queue(dc: DataCentre, host: str, count: int) -> list[str]:
    """Put `count` pending runs in the local queue of `host`'s (full) instance: claim each from
    the shared queue, dispatch it with the claim's token as attempt id, record it dispatched."""
    assert dc.hot_state is not None
    queue, runs = SharedQueue(dc.hot_state), SharedRunStore(dc.hot_state)
    registry = InstanceRegistry(dc.hot_state, TenantSettingsCatalog())
    provider_class = HttpRuntimeProvider if RUNTIME_HOSTS[host] == "http" else GrpcRuntimeProvider
    provider = provider_class(registry)
    placed = []
    try:
        while len(placed) < count:
            claim = await queue.claim_next(
                PumpIdentity(pump_runtime_instance_id="operator", pump_worker_id=host)
            )
            assert claim is not None, "no pending run left to place"
            run = await runs.get(claim.shared_run_id)
            assert run is not None and run.snapshot is not None
            response = await provider.dispatch(
                DispatchRequest(
                    runtime_instance_id=instance_id(host),
                    shared_run_id=run.shared_run_id,
                    pipeline=run.pipeline,
                    input=run.input,
                    snapshot=run.snapshot,
                    attributes={"shared_run_id": run.shared_run_id, DISPATCH_ATTEMPT_KEY: claim.token},
                )
            )
            assert response.status is LocalRunStatus.QUEUED, response
            fields = {
                "local_run_id": response.local_run_id,
                "assigned_runtime_instance_id": instance_id(host),
            }
            assert (await queue.mark_dispatched(run.shared_run_id, claim.token, fields)).applied
            placed.append(run.shared_run_id)
    finally:
        await provider.aclose()
    return placed
