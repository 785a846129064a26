"""Issue 17.1: a Redis Cluster master is SIGKILLed and restarted (same port, nodes.conf, AOF)
while the first step of every run is in its executor; nothing is lost.

The module starts its own 3-master cluster (the session cluster stays untouched) and a full
`RuntimeServices` (control plane, background pump, two in-process runtime instances, audit)
on a `redis+cluster://` URL. While the master is down, the steps owning its slots wait out
the outage (`store_unavailable` backoff); once it is back every run completes.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.dag import EngineSettings
from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import StoreRetryPolicy
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until
from tests.redis_cluster import RedisClusterServer
from tests.reliability.fault_support import (
    PIPELINE,
    STEPS_PER_RUN,
    TENANT,
    AcceptedCompletions,
    FaultyWorkExecutor,
)

RUNS = 12
RESTARTED_MASTER = 1


@dataclass
class ClusterFault:
    services: RuntimeServices
    executor: FaultyWorkExecutor
    observer: AcceptedCompletions
    shared_run_ids: list[str]
    keys_on_restarted_master: int = 0


def _settings(data_dir: Path, redis_url: str) -> RuntimeSettings:
    return RuntimeSettings(
        data_dir=data_dir,
        redis_url=redis_url,
        redis_prefix=f"clfault{secrets.token_hex(3)}:",
        engine=EngineSettings(
            lease_ms=3_000,
            store_retry=StoreRetryPolicy(initial_ms=20, max_ms=400),
            idle_wait_while_executing_ms=100,
        ),
        control_plane=ControlPlaneSettings(
            host="clusterfaulthost",
            local_instances=2,
            workers_per_instance=RUNS,
            max_local_workers_per_execution=2,
            max_concurrent_runs_per_instance=RUNS // 2,
            heartbeat_interval_ms=200,
            pump_idle_interval_ms=20,
            claim_lease_ms=3_000,
            reservation_ttl_ms=3_000,
            health_window_ms=60_000,
        ),
    )


async def _all_runs_finished(fault: ClusterFault) -> bool:
    plane = fault.services.control_plane
    try:
        statuses = [await plane.run_status(srun, TENANT) for srun in fault.shared_run_ids]
    except StoreUnavailableError:
        return False
    return all(s.local_status in ("Completed", "Failed", "Cancelled") for s in statuses)


@pytest.fixture(scope="module")
async def fault(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClusterFault]:
    data_dir = Path(tmp_path_factory.mktemp("cluster-faults"))
    cluster = RedisClusterServer(data_dir / "cluster").start()
    observer, executor = AcceptedCompletions(), FaultyWorkExecutor()
    try:
        async with RuntimeServices(_settings(data_dir, cluster.url), observer=observer) as services:
            services.executors.register(executor)
            plane = services.control_plane
            submitted = [
                await plane.submit(PIPELINE, {"run": n}, SubmitMode.QUEUE_FIRST, TENANT) for n in range(RUNS)
            ]
            state = ClusterFault(services, executor, observer, [s.shared_run_id for s in submitted])

            async def every_first_step_in_flight() -> bool:
                return executor.waiting >= RUNS

            await wait_until(every_first_step_in_flight, timeout=30)
            state.keys_on_restarted_master = cluster.dbsize(RESTARTED_MASTER)
            cluster.restart_master(RESTARTED_MASTER)
            executor.gate.set()
            await wait_until(lambda: _all_runs_finished(state), timeout=60, interval=0.05)
            yield state
    finally:
        cluster.stop()


async def test_every_run_completes_after_a_master_restart(fault: ClusterFault) -> None:
    assert fault.keys_on_restarted_master > 0, "the restarted master held no runtime keys"
    for shared_run_id in fault.shared_run_ids:
        status = await fault.services.control_plane.run_status(shared_run_id, TENANT)
        assert (status.local_status, status.execution_status) == ("Completed", "Completed"), status
        assert [row.status for row in status.steps] == ["Completed"] * STEPS_PER_RUN


async def test_each_shared_run_created_exactly_one_execution_on_the_cluster(fault: ClusterFault) -> None:
    plane = fault.services.control_plane
    execution_ids = {(await plane.run_status(srun, TENANT)).execution_id for srun in fault.shared_run_ids}
    assert len(execution_ids) == RUNS and None not in execution_ids
    assert sorted(fault.observer.created) == sorted(execution_ids)


async def test_no_completion_is_accepted_twice_across_the_restart(fault: ClusterFault) -> None:
    assert fault.observer.completed, "no completion observed"
    twice = {key: n for key, n in fault.observer.completed.items() if n > 1}
    assert twice == {}
    assert sum(fault.observer.completed.values()) == RUNS * STEPS_PER_RUN


async def test_the_runtime_keys_are_spread_over_every_master(fault: ClusterFault) -> None:
    """No hot slot: executions hash to their own slots, so every master holds some keys."""
    redis = fault.services.hot_state.redis
    sizes = [await redis.dbsize(target_nodes=node) for node in redis.get_primaries()]
    assert len(sizes) == 3 and all(size > 0 for size in sizes), sizes
