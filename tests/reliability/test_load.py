"""Issue 9.2: 10,000 queued shared runs drained by 4 pumps into 3 runtime instances.

The module runs its own redis-server (the runs leave ~10 keys each, kept out of the
session server) and one drain scenario; each test asserts one property of it:
no duplicate dispatch, no lost run (every SharedRunId ends Completed through exactly one
LocalRunId and one ExecutionId), and bounded control-plane memory. Stated bound: the
process's resident memory grows by less than MEMORY_BOUND_MB (50 MB) between the moment
the 10,000 runs are queued and the end of the drain (sampled every 250 ms). It holds
because runtime instances keep at most FINISHED_RUNS_KEPT finished runs in memory
(measured: about +26 MB; about +82 MB when every finished run is kept).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.dag import EngineEvent
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state
from runtime_core.instances import LocalRunStatus
from runtime_core.providers import DispatchRequest, DispatchResponse, LocalRuntimeProvider
from runtime_core.queueing import BackgroundPump, PumpIdentity, QueueItemStatus, SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, ONE_STEP, control_plane, start_instance

RUNS = 10_000
PUMPS = 4
INSTANCES = 3
DRAIN_BUDGET_S = 170.0
MEMORY_BOUND_MB = 50.0
SUBMIT_BATCH = 250

log = logging.getLogger("tests.reliability.load")


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class CountingProvider(LocalRuntimeProvider):
    """The local provider, counting successful dispatches per SharedRunId."""

    def __init__(self, provider: LocalRuntimeProvider) -> None:
        super().__init__(provider.pool, provider.scaler)
        self.dispatched: Counter[str] = Counter()

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        response = await super().dispatch(request)
        self.dispatched[request.shared_run_id] += 1
        return response


class FinalizedCounter:
    def __init__(self) -> None:
        self.finalized: dict[str, str] = {}
        self.created = 0

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "execution.finalized":
            self.finalized[event.execution_id] = str(event.attributes.get("status", ""))
        elif event.name == "execution.created":
            self.created += 1


@dataclass
class LoadRun:
    plane: ControlPlane
    shared_run_ids: list[str]
    provider: CountingProvider
    events: FinalizedCounter
    records: dict[str, object] = field(default_factory=dict)
    drain_s: float = 0.0
    rss_baseline_mb: float = 0.0
    rss_peak_mb: float = 0.0


async def _sample_rss(run: LoadRun, stop: asyncio.Event) -> None:
    while not stop.is_set():
        run.rss_peak_mb = max(run.rss_peak_mb, _rss_mb())
        try:
            await asyncio.wait_for(stop.wait(), timeout=0.25)
        except TimeoutError:
            pass


@pytest.fixture(scope="module")
async def load(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LoadRun]:
    server = EmbeddedRedis(Path(tmp_path_factory.mktemp("load-redis")), appendonly=False).start()
    hot_state = connect_hot_state(server.url, prefix=f"load{secrets.token_hex(3)}:")
    plane = control_plane(hot_state)
    events = FinalizedCounter()
    plane.parts.engine.observer = events
    provider = CountingProvider(plane.parts.providers.by_name("local"))  # type: ignore[arg-type]
    plane.parts.providers.add(provider)
    pumps = [
        BackgroundPump(
            plane.parts.pump,
            plane.parts.gate,
            PumpIdentity(pump_runtime_instance_id="rt_loadhost:control-plane", pump_worker_id=f"pump-{n}"),
            batch_size=50,
            idle_interval_ms=20,
        )
        for n in range(PUMPS)
    ]
    try:
        for n in range(1, INSTANCES + 1):
            await start_instance(
                plane,
                n=n,
                worker_count=16,
                max_local_workers_per_execution=1,
                max_concurrent_runs=16,
                local_queue_capacity=64,
            )
        ids: list[str] = []
        for start in range(0, RUNS, SUBMIT_BATCH):
            batch = range(start, min(RUNS, start + SUBMIT_BATCH))
            submitted = await asyncio.gather(
                *(plane.submit(ONE_STEP, {"n": n}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT) for n in batch)
            )
            ids += [s.shared_run_id for s in submitted]
        run = LoadRun(plane, ids, provider, events, rss_baseline_mb=_rss_mb())
        stop_sampling = asyncio.Event()
        sampler = asyncio.create_task(_sample_rss(run, stop_sampling))
        started = time.monotonic()
        for pump in pumps:
            pump.start()

        async def every_run_finalized() -> bool:
            return len(events.finalized) >= RUNS

        await wait_until(every_run_finalized, timeout=DRAIN_BUDGET_S, interval=0.1)
        run.drain_s = time.monotonic() - started
        stop_sampling.set()
        await sampler
        log.warning(
            "load: %d runs, %d pumps, %d instances, %.1f s, %.0f runs/s, rss +%.1f MB (peak %.1f MB)",
            RUNS,
            PUMPS,
            INSTANCES,
            run.drain_s,
            RUNS / run.drain_s,
            run.rss_peak_mb - run.rss_baseline_mb,
            run.rss_peak_mb,
        )
        yield run
    finally:
        for pump in pumps:
            await pump.stop()
        await plane.stop()
        await hot_state.close()
        server.stop()


async def test_the_drain_of_10000_runs_finishes_within_the_budget(load: LoadRun) -> None:
    assert len(load.events.finalized) == RUNS
    assert load.drain_s < DRAIN_BUDGET_S


async def test_no_shared_run_is_dispatched_twice(load: LoadRun) -> None:
    assert len(load.provider.dispatched) == RUNS
    assert max(load.provider.dispatched.values()) == 1
    assert load.events.created == RUNS


async def _hmget_all(plane: ControlPlane, keys: list[str], fields: list[str]) -> list[list[str | None]]:
    pipe = plane.parts.hot_state.redis.pipeline(transaction=False)
    for key in keys:
        pipe.hmget(key, fields)
    return await pipe.execute()


async def _items(plane: ControlPlane, shared_run_ids: list[str]) -> list[str | None]:
    """Each run's queue item, read from the run's own queue partition."""
    keys = plane.parts.queue.keys
    pipe = plane.parts.hot_state.redis.pipeline(transaction=False)
    for shared_run_id in shared_run_ids:
        pipe.hget(keys.of_run(shared_run_id).items, shared_run_id)
    return await pipe.execute()


async def test_every_shared_run_ends_completed_through_one_local_run_and_one_execution(
    load: LoadRun,
) -> None:
    plane, ids = load.plane, load.shared_run_ids
    executions = list(load.events.finalized)
    meta_keys = [plane.parts.dag_store.keys(e).meta for e in executions]
    metas = await _hmget_all(plane, meta_keys, ["status", "shared_run_id", "local_run_id"])
    completed = {shared: local for status, shared, local in metas if status == "Completed"}
    runs = await _hmget_all(plane, [plane.parts.runs.keys.run(s) for s in ids], ["status", "local_run_id"])
    items = await _items(plane, ids)
    lost = [s for s, (status, local) in zip(ids, runs, strict=True) if completed.get(s) != local]
    assert (len(completed), lost) == (RUNS, [])
    assert Counter(status for status, _local in runs) == Counter({SharedRunStatus.DISPATCHED.value: RUNS})
    assert Counter(json.loads(item)["status"] for item in items) == Counter(
        {QueueItemStatus.DISPATCHED.value: RUNS}
    )
    sample = [await plane.parts.index.get_by_shared(s) for s in ids[:: RUNS // 200]]
    assert {record.status if record else None for record in sample} == {LocalRunStatus.COMPLETED}
    assert await plane.parts.queue.pending_count() == 0


async def test_control_plane_memory_growth_stays_under_the_stated_bound(load: LoadRun) -> None:
    assert load.rss_peak_mb - load.rss_baseline_mb < MEMORY_BOUND_MB
