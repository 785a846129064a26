"""Issue 13 growth test: 2,000 finished runs leave nothing behind in Redis.

A private redis-server (so DBSIZE and Redis's allocated bytes measure this runtime alone), the
runtime with one in-process instance and the background pump, a 300 ms grace and a 1 s record
retention. The baseline is taken after a warm-up batch was run and cleaned up (Lua scripts
loaded, the queue's sequence counter created, Redis's per-command latency histograms made).
Then 2,000 one-step runs go to completion; once the grace and the retention passed, the key
count must be back at the baseline and the allocated bytes within a small bound of it; every
run is a Completed run record, and run.status / ledger / trace / replay of the first run
answer. The bytes left behind per finished run are printed (target 0). Redis keeps a one-time
allocation sized by the peak load (about 100 KB after 2,000 queued runs; not a key, not per
run), so a second round of 500 runs must not add to it: what a run leaves behind is measured
there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices
from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.lifecycle import HotStateRetention
from runtime_core.queueing import SubmitMode
from runtime_core.storage import RunRecordCursor, RunRecordQuery
from tests.helpers import wait_until
from tests.integration.control_plane_support import ONE_STEP, TENANT_A
from tests.integration.lifecycle_support import lifecycle_runtime

RUNS = 2_000
SECOND_ROUND_RUNS = 500
WARM_UP_RUNS = 20
SUBMIT_CONCURRENCY = 50
MAX_KEYS_LEFT = 0
# Redis's one-time, peak-sized allocation after the first round (measured ~110 KB), with margin.
MAX_FIRST_ROUND_BYTES = 192 * 1024
# After the second round, at the first round's level: only reading noise (measured under 4 KB).
MAX_SECOND_ROUND_BYTES = 16 * 1024


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EmbeddedRedis]:
    server = EmbeddedRedis(Path(tmp_path_factory.mktemp("growth-redis")), appendonly=False).start()
    yield server  # type: ignore[misc]
    server.stop()


async def footprint(services: RuntimeServices) -> tuple[int, int]:
    """(DBSIZE, bytes Redis allocated, without client connection buffers), from MEMORY STATS.

    Client buffers grow and shrink with how many pooled connections were busy a moment ago;
    they are not state a run left behind, so they are taken out of the comparison.
    """
    redis = services.hot_state.redis
    stats = await redis.execute_command("MEMORY", "STATS")
    memory = stats if isinstance(stats, dict) else dict(zip(stats[::2], stats[1::2], strict=True))
    return int(await redis.dbsize()), int(memory["total.allocated"]) - int(memory["clients.normal"])


async def run_all(plane: ControlPlane, count: int) -> list[str]:
    """Submit `count` one-step runs (QueueFirst; the background pump dispatches them)."""
    shared_run_ids: list[str] = []
    for start in range(0, count, SUBMIT_CONCURRENCY):
        batch = range(start, min(start + SUBMIT_CONCURRENCY, count))
        submitted = await asyncio.gather(
            *(plane.submit(ONE_STEP, {"n": n}, SubmitMode.QUEUE_FIRST, TENANT_A) for n in batch)
        )
        shared_run_ids += [result.shared_run_id for result in submitted]
    return shared_run_ids


async def archived_count(services: RuntimeServices, status: str | None = None) -> int:
    """Run records of the tenant (pages of 1,000, newest first)."""
    store, total, cursor = services.durable_store, 0, None
    while True:
        page = await store.list_run_records(
            TENANT_A.tenant_id, RunRecordQuery(status=status, limit=1000, before=cursor)
        )
        total += len(page)
        if len(page) < 1000:
            return total
        cursor = RunRecordCursor(created_at=page[-1].created_at, shared_run_id=page[-1].shared_run_id)


async def expiring_keys(services: RuntimeServices) -> int:
    """Keys that still carry a TTL (retired records not expired yet), from INFO keyspace."""
    keyspace = await services.hot_state.redis.info("keyspace")
    return sum(int(db.get("expires", 0)) for db in keyspace.values() if isinstance(db, dict))


async def settle(services: RuntimeServices, keys_at_most: int | None = None) -> tuple[int, int]:
    """Wait until the key count is down to `keys_at_most` (if given) and no retired record is
    left to expire, then until two readings a second apart are equal (Redis shrank its emptied
    hash tables in its cron)."""
    last = await footprint(services)

    async def keys_down() -> bool:
        if await expiring_keys(services):
            return False
        return keys_at_most is None or (await footprint(services))[0] <= keys_at_most

    async def steady() -> bool:
        nonlocal last
        current, last = last, await footprint(services)
        return current == last

    await wait_until(keys_down, timeout=600, interval=1.0)
    await wait_until(steady, timeout=120, interval=1.0)
    return last


@pytest.mark.slow
async def test_two_thousand_finished_runs_leave_redis_as_it_was(
    private_redis: EmbeddedRedis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hot = HotStateRetention(grace_ms=300, record_retention_ms=1_000, sweep_interval_ms=100, sweep_batch=500)
    settings = lifecycle_runtime(
        private_redis.url,
        tmp_path,
        hot,
        workers_per_instance=8,
        max_concurrent_runs_per_instance=32,
        local_queue_capacity=500,
        pump_idle_interval_ms=20,
    )
    settings = settings.model_copy(update={"redis_prefix": "growth:"})
    async with RuntimeServices(settings) as services:
        plane = services.control_plane
        # Redis allocates a latency histogram per command type on its first call: let MEMORY STATS
        # and DBSIZE make theirs now, so the baseline already holds them.
        await footprint(services)
        warm_up = await run_all(plane, WARM_UP_RUNS)

        async def warm_up_gone() -> bool:
            """Archived, and their hot records expired."""
            records = [await plane.parts.runs.get(run_id) for run_id in warm_up]
            return records == [None] * WARM_UP_RUNS and await archived_count(services) == WARM_UP_RUNS

        await wait_until(warm_up_gone, timeout=120, interval=0.2)
        base_keys, base_memory = await settle(services)

        shared_run_ids = await run_all(plane, RUNS)
        keys, memory = await settle(services, keys_at_most=base_keys + MAX_KEYS_LEFT)
        await run_all(plane, SECOND_ROUND_RUNS)
        keys_after, memory_after = await settle(services, keys_at_most=base_keys + MAX_KEYS_LEFT)

        with capsys.disabled():
            print(
                f"\ngrowth: baseline {base_keys} keys, {base_memory} bytes; after {RUNS} finished runs "
                f"{keys} keys, {memory} bytes ({(memory - base_memory) / RUNS:.1f} bytes per run, a "
                f"one-time peak-sized allocation); after {SECOND_ROUND_RUNS} more {keys_after} keys, "
                f"{memory_after} bytes: left behind per finished run "
                f"{max(memory_after - memory, 0) / SECOND_ROUND_RUNS:.1f} bytes, "
                f"{(keys_after - base_keys) / (RUNS + SECOND_ROUND_RUNS):.4f} keys"
            )
        assert keys == keys_after == base_keys
        assert memory - base_memory <= MAX_FIRST_ROUND_BYTES
        assert memory_after - memory <= MAX_SECOND_ROUND_BYTES
        total = WARM_UP_RUNS + RUNS + SECOND_ROUND_RUNS
        assert await archived_count(services, status="Completed") == total

        first = shared_run_ids[0]
        status = await plane.run_status(first, TENANT_A)
        assert (status.execution_status, status.local_status, len(status.steps)) == (
            "Completed",
            "Completed",
            1,
        )
        assert status.execution_id is not None
        ledger = await services.audit.queries.ledger(TENANT_A, shared_run_id=first)
        assert {"shared_run.submitted", "shared_run.dispatched", "execution.finalized"} <= {
            e.event for e in ledger
        }
        assert await services.audit.queries.trace(TENANT_A, status.execution_id)
        replayed = await services.audit.replay.replay(status.execution_id, TENANT_A)
        assert (replayed.restored, replayed.status) == (True, "Completed")
