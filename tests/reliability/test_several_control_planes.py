"""Issue 17.3: three `mcp-runtime serve` processes pump one Redis (a single node, and a 3-master
Redis Cluster): RUNS runs of three tenants, none dispatched twice, none lost, the work spread
over the three, and a fairness figure across the tenants.

RUNS is 1,500 per Redis kind in the suite (about 45 s each on 2 cores, so `.ci/run` stays
under its 20 minutes); `MCP_RUNTIME_TEST_PLANE_RUNS=10000` (with `--timeout 900`) runs the issue's 10,000.

The scenario (one per Redis kind): three control planes with their in-process runtime
instances share the Redis (one key prefix) and one data directory (one SQLite durable store,
opened by all three); this test process submits RUNS queue-first one-step runs, the tenants
interleaved, while the three background pumps drain the shared queue. Finished runs are
archived after a 1 s grace, so completion is read from the durable run records and duplicate
dispatch from the `shared_run.dispatched` ledger entries all three processes write. Fairness:
Jain's index over the tenants' mean queue waits (submit -> dispatch), 1.0 = equal waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sqlite3
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import connect_hot_state, find_free_port
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.queueing import SubmitMode
from runtime_core.storage import SQLITE_FILE_NAME
from tests.conftest import RedisTarget
from tests.e2e.mcp_support import child_process, clean_environment, serve_command, wait_for_health
from tests.helpers import wait_until
from tests.integration.control_plane_support import ONE_STEP, control_plane
from tests.reliability.restart_support import write_config

RUNS = int(os.environ.get("MCP_RUNTIME_TEST_PLANE_RUNS", "1500"))
PLANES = 3
RUN_SLOTS = 8
TENANTS = ("fair-a", "fair-b", "fair-c")
SUBMIT_CONCURRENCY = 50
SUBMIT_ATTEMPTS = 5
DRAIN_BUDGET_S = 240.0
MIN_FAIRNESS = 0.9


@dataclass(frozen=True)
class Drained:
    kind: str
    submitted: dict[str, str]  # shared run id -> tenant
    records: dict[str, sqlite3.Row]  # shared run id -> its durable run record
    dispatches: dict[str, list[dict[str, str]]]  # shared run id -> its shared_run.dispatched entries
    seconds: float


def _snapshot(tenant_id: str) -> ExecutionContextSnapshot:
    return ExecutionContextSnapshot(user_id=f"{tenant_id}-user", tenant_id=tenant_id, roles=("operator",))


@contextmanager
def _served_planes(redis_url: str, prefix: str, data_dir: Path) -> Iterator[None]:
    config = write_config(data_dir / "server.json")
    with ExitStack() as stack:
        for n in range(PLANES):
            env = clean_environment(
                REDIS_URL=redis_url,
                MCP_RUNTIME_REDIS_PREFIX=prefix,
                MCP_RUNTIME_HOST=f"plane{n}",  # each process names its control plane and instance
                MCP_RUNTIME_HOT_GRACE_MS="1000",
                # One worker per run, RUN_SLOTS runs at once on each process's in-process instance.
                MCP_RUNTIME_WORKERS_PER_INSTANCE=str(RUN_SLOTS),
                MCP_RUNTIME_MAX_WORKERS_PER_EXECUTION="1",
                MCP_RUNTIME_MAX_RUNS_PER_INSTANCE=str(RUN_SLOTS),
            )
            port = find_free_port()
            command = serve_command("http", data_dir, "--port", str(port), "--config", str(config))
            log = data_dir.parent / f"{data_dir.name}-plane{n}.log"
            process = stack.enter_context(child_process(command, env=env, log=log))
            wait_for_health(process, f"http://127.0.0.1:{port}", log)
        yield


async def _submit_as_a_client_would(plane: ControlPlane, tenant_id: str, n: int) -> str:
    """One submit with an idempotency key, re-sent while Redis answers `store_unavailable` (as
    the error tells clients to; the redis-py cluster client fails in-flight commands when
    another task's error re-initialises its connections): the key makes the re-send the same run."""
    for _ in range(SUBMIT_ATTEMPTS - 1):
        with contextlib.suppress(StoreUnavailableError):
            return await _submit(plane, tenant_id, n)
    return await _submit(plane, tenant_id, n)


async def _submit(plane: ControlPlane, tenant_id: str, n: int) -> str:
    key = f"planes-run-{n}"
    submitted = await plane.submit(
        ONE_STEP, {}, SubmitMode.QUEUE_FIRST, _snapshot(tenant_id), idempotency_key=key
    )
    return submitted.shared_run_id


async def _submit_all(redis_url: str, prefix: str) -> dict[str, str]:
    """RUNS runs, tenants interleaved, SUBMIT_CONCURRENCY at a time; shared run id -> tenant."""
    hot_state = connect_hot_state(redis_url, prefix=prefix)
    submitter = control_plane(hot_state, host="submitter")
    tenants = [TENANTS[n % len(TENANTS)] for n in range(RUNS)]
    submitted: dict[str, str] = {}
    try:
        for start in range(0, RUNS, SUBMIT_CONCURRENCY):
            batch = list(enumerate(tenants))[start : start + SUBMIT_CONCURRENCY]
            ids = await asyncio.gather(*(_submit_as_a_client_would(submitter, t, n) for n, t in batch))
            submitted.update({run_id: t for run_id, (_, t) in zip(ids, batch, strict=True)})
    finally:
        await submitter.stop()
        await hot_state.close()
    return submitted


def _read(db_path: Path, sql: str) -> list[sqlite3.Row]:
    with sqlite3.connect(db_path, timeout=30) as db:
        db.row_factory = sqlite3.Row
        return db.execute(sql).fetchall()


def _archived_count(db_path: Path) -> int:
    return _read(db_path, "SELECT count(*) AS n FROM run_records")[0]["n"] if db_path.exists() else 0


def _dispatch_entries(db_path: Path) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = defaultdict(list)
    rows = _read(
        db_path,
        "SELECT shared_run_id, local_run_id, attributes FROM ledger WHERE event = 'shared_run.dispatched'",
    )
    for row in rows:
        found[row["shared_run_id"]].append(
            {"local_run_id": row["local_run_id"], **json.loads(row["attributes"])}
        )
    return dict(found)


@pytest.fixture(scope="module", params=["single", "cluster"])
async def drained(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Drained]:
    target: RedisTarget = request.getfixturevalue(
        "redis_cluster" if request.param == "cluster" else "redis_server"
    )
    prefix = f"planes{secrets.token_hex(3)}:"
    data_dir = tmp_path_factory.mktemp(f"planes-{request.param}")
    db_path = data_dir / SQLITE_FILE_NAME
    with _served_planes(target.url, prefix, data_dir):
        started = time.monotonic()
        submitted = await _submit_all(target.url, prefix)

        async def all_archived() -> bool:
            return await asyncio.to_thread(_archived_count, db_path) >= RUNS

        await wait_until(all_archived, timeout=DRAIN_BUDGET_S, interval=0.5)
        seconds = time.monotonic() - started
    # The processes stopped (SIGTERM): every buffered ledger entry is flushed.
    records = {row["shared_run_id"]: row for row in _read(db_path, "SELECT * FROM run_records")}
    yield Drained(request.param, submitted, records, _dispatch_entries(db_path), seconds)


def test_no_run_is_lost_every_one_completed(drained: Drained) -> None:
    assert set(drained.records) == set(drained.submitted)
    outcomes = Counter((row["shared_status"], row["local_status"]) for row in drained.records.values())
    assert outcomes == Counter({("Dispatched", "Completed"): RUNS}), outcomes
    tenants = Counter(row["tenant_id"] for row in drained.records.values())
    assert tenants == Counter(drained.submitted.values())


def test_no_run_is_dispatched_twice(drained: Drained) -> None:
    twice = {run: entries for run, entries in drained.dispatches.items() if len(entries) != 1}
    assert twice == {}, f"{len(twice)} runs dispatched more than once"
    assert set(drained.dispatches) == set(drained.submitted)
    for run, row in drained.records.items():
        assert drained.dispatches[run][0]["local_run_id"] == row["local_run_id"]


def test_every_control_plane_pumped_a_share_of_the_runs(drained: Drained) -> None:
    pumps = Counter(entries[0]["pump.runtime.instance.id"] for entries in drained.dispatches.values())
    print(f"\n[{drained.kind}] {RUNS} runs in {drained.seconds:.1f} s by pump: {dict(pumps)}")
    assert set(pumps) == {f"control-plane:plane{n}" for n in range(PLANES)}


def test_tenants_wait_alike_in_the_shared_queue(drained: Drained) -> None:
    waits: dict[str, list[float]] = defaultdict(list)
    for row in drained.records.values():
        created, dispatched = (
            datetime.fromisoformat(row["created_at"]),
            datetime.fromisoformat(row["dispatched_at"]),
        )
        waits[row["tenant_id"]].append((dispatched - created).total_seconds())
    means = [statistics.fmean(values) for values in waits.values()]
    fairness = sum(means) ** 2 / (len(means) * sum(m * m for m in means))
    figures = {
        t: f"mean {statistics.fmean(v):.2f} s, p95 {statistics.quantiles(v, n=20)[-1]:.2f} s"
        for t, v in waits.items()
    }
    print(f"\n[{drained.kind}] queue wait by tenant: {figures}; Jain's fairness index {fairness:.3f}")
    assert fairness >= MIN_FAIRNESS
