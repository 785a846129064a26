"""Issue 9.1: Redis is SIGKILLed twice under 20 running executions and restarted with AOF.

The module starts its own `redis-server` (appendonly yes, appendfsync everysec) on a fixed
port and a full `RuntimeServices` (control plane, background pump, two in-process runtime
instances, audit) on it. Fault 1 kills Redis while the first step of every execution is in
its executor; the steps then finish with Redis down, one-shot control-plane calls are
tried, and Redis is restarted on the same port and directory. Fault 2 kills and restarts
it again at an arbitrary moment, once about half of all steps have completed. Each test
below asserts one property of that single scenario.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings
from runtime_core.dag import EngineSettings
from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import EmbeddedRedis, StoreRetryPolicy, find_free_port
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until
from tests.reliability.fault_support import (
    PIPELINE,
    STEPS_PER_RUN,
    TENANT,
    AcceptedCompletions,
    FaultyWorkExecutor,
    OutageLog,
)

RUNS = 20
ONE_SHOT_BOUND_S = 5.0


@dataclass
class OneShot:
    name: str
    error: BaseException | None
    elapsed_s: float


@dataclass
class FaultScenario:
    services: RuntimeServices
    executor: FaultyWorkExecutor
    observer: AcceptedCompletions
    outages: OutageLog
    server: EmbeddedRedis
    shared_run_ids: list[str]
    one_shots: list[OneShot] = field(default_factory=list)
    faults_injected: int = 0

    @property
    def plane(self) -> ControlPlane:
        return self.services.control_plane


def _settings(data_dir: Path, redis_url: str) -> RuntimeSettings:
    return RuntimeSettings(
        data_dir=data_dir,
        redis_url=redis_url,
        redis_prefix=f"faults{secrets.token_hex(3)}:",
        engine=EngineSettings(
            lease_ms=3_000,
            store_retry=StoreRetryPolicy(initial_ms=20, max_ms=400),
            idle_wait_while_executing_ms=100,
        ),
        control_plane=ControlPlaneSettings(
            host="faulthost",
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


async def _timed(name: str, call: Callable[[], Awaitable[object]]) -> OneShot:
    started = time.monotonic()
    try:
        await asyncio.wait_for(call(), timeout=ONE_SHOT_BOUND_S * 2)
    except BaseException as exc:  # recorded and asserted by the tests
        return OneShot(name, exc, time.monotonic() - started)
    return OneShot(name, None, time.monotonic() - started)


async def _one_shot_calls_while_down(scenario: FaultScenario) -> list[OneShot]:
    plane, some_run = scenario.plane, scenario.shared_run_ids[0]
    return [
        await _timed("run_status", lambda: plane.run_status(some_run, TENANT)),
        await _timed("submit", lambda: plane.submit(PIPELINE, {"run": -1}, SubmitMode.QUEUE_FIRST, TENANT)),
        await _timed("drain", lambda: plane.drain(5, TENANT)),
        await _timed("list_instances", lambda: plane.list_instances(TENANT)),
        await _timed("cancel", lambda: plane.cancel(some_run, TENANT)),
    ]


async def _all_runs_finished(scenario: FaultScenario) -> bool:
    try:
        statuses = [await scenario.plane.run_status(srun, TENANT) for srun in scenario.shared_run_ids]
    except StoreUnavailableError:
        return False  # polled across the second restart
    return all(s.local_status in ("Completed", "Failed", "Cancelled") for s in statuses)


async def _inject_faults(scenario: FaultScenario) -> None:
    executor, server = scenario.executor, scenario.server

    async def every_first_step_in_flight() -> bool:
        return executor.waiting >= RUNS

    await wait_until(every_first_step_in_flight, timeout=30)
    server.kill()
    scenario.faults_injected += 1
    scenario.one_shots = await _one_shot_calls_while_down(scenario)
    executor.gate.set()

    async def completions_and_idle_workers_retried_while_down() -> bool:
        # Idle workers only re-check Redis every idle_wait_while_executing_ms (100 ms here)
        # while another worker of theirs executes: wait for one check to meet the outage too.
        retried = scenario.outages.count("step.advance") >= RUNS
        return executor.returned >= RUNS and retried and scenario.outages.count("engine.worker") > 0

    await wait_until(completions_and_idle_workers_retried_while_down, timeout=30)
    server.start()

    async def half_of_the_steps_completed() -> bool:
        return sum(scenario.observer.completed.values()) >= RUNS * STEPS_PER_RUN // 2

    await wait_until(half_of_the_steps_completed, timeout=30)
    server.kill()
    scenario.faults_injected += 1
    server.start()


@pytest.fixture(scope="module")
async def scenario(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FaultScenario]:
    data_dir = Path(tmp_path_factory.mktemp("faults"))
    server = EmbeddedRedis(data_dir / "redis", port=find_free_port(), appendonly=True).start()
    outages = OutageLog()
    logging.getLogger("runtime_core").addHandler(outages)
    observer, executor = AcceptedCompletions(), FaultyWorkExecutor()
    try:
        async with RuntimeServices(_settings(data_dir, server.url), observer=observer) as services:
            services.executors.register(executor)
            submitted = [
                await services.control_plane.submit(PIPELINE, {"run": n}, SubmitMode.QUEUE_FIRST, TENANT)
                for n in range(RUNS)
            ]
            state = FaultScenario(
                services, executor, observer, outages, server, [s.shared_run_id for s in submitted]
            )
            await _inject_faults(state)
            await wait_until(lambda: _all_runs_finished(state), timeout=60, interval=0.05)
            yield state
    finally:
        logging.getLogger("runtime_core").removeHandler(outages)
        server.stop()


async def _execution_ids(scenario: FaultScenario) -> list[str]:
    statuses = [await scenario.plane.run_status(srun, TENANT) for srun in scenario.shared_run_ids]
    return [s.execution_id for s in statuses if s.execution_id]


async def test_embedded_redis_default_is_appendonly_with_everysec_fsync(scenario: FaultScenario) -> None:
    config = await scenario.services.hot_state.redis.config_get("append*")
    assert (config["appendonly"], config["appendfsync"]) == ("yes", "everysec")
    assert EmbeddedRedis(Path("unused")).appendonly is True


@pytest.mark.parametrize("call", ["run_status", "submit", "drain", "list_instances", "cancel"])
async def test_one_shot_call_while_redis_is_down_answers_store_unavailable_within_the_bound(
    scenario: FaultScenario, call: str
) -> None:
    [outcome] = [o for o in scenario.one_shots if o.name == call]
    assert isinstance(outcome.error, StoreUnavailableError), repr(outcome.error)
    assert outcome.error.code == "store_unavailable"
    assert outcome.elapsed_s < ONE_SHOT_BOUND_S


async def test_every_run_completes_after_two_redis_sigkills(scenario: FaultScenario) -> None:
    assert scenario.faults_injected == 2
    for shared_run_id in scenario.shared_run_ids:
        status = await scenario.plane.run_status(shared_run_id, TENANT)
        assert (status.local_status, status.execution_status) == ("Completed", "Completed"), status
        assert [row.status for row in status.steps] == ["Completed"] * STEPS_PER_RUN


async def test_each_shared_run_created_exactly_one_execution(scenario: FaultScenario) -> None:
    execution_ids = {
        (await scenario.plane.run_status(srun, TENANT)).execution_id for srun in scenario.shared_run_ids
    }
    assert len(execution_ids) == RUNS and None not in execution_ids
    # A creation whose reply was lost is retried with the same ExecutionId (not re-announced).
    assert set(scenario.observer.created) <= execution_ids
    assert len(scenario.observer.created) == len(set(scenario.observer.created))


async def test_no_step_has_its_completion_accepted_twice(scenario: FaultScenario) -> None:
    store = scenario.services.dag_store
    for execution_id in await _execution_ids(scenario):
        view = await store.read_execution(execution_id)
        assert view is not None
        run = view.meta.state["run"]
        for step in view.steps:
            key = (execution_id, step.name)
            assert scenario.observer.completed[key] <= 1, f"{key} accepted twice"
            assert scenario.executor.calls[key] >= 1
            assert step.status == "Completed" and step.result == {"data": {"step": step.name, "run": run}}


async def test_a_step_executed_again_had_its_first_completion_refused(scenario: FaultScenario) -> None:
    """Claim-token rule: a re-execution only happens after a claim was recovered (lease lapsed)."""
    store = scenario.services.dag_store
    for execution_id in await _execution_ids(scenario):
        view = await store.read_execution(execution_id)
        assert view is not None
        for step in view.steps:
            executions = scenario.executor.calls[(execution_id, step.name)]
            assert executions == 1 or step.recovery_count >= executions - 1, (execution_id, step)


async def test_workers_pump_and_heartbeats_backed_off_with_structured_logs(scenario: FaultScenario) -> None:
    assert scenario.outages.count("step.advance") >= RUNS
    assert scenario.outages.count("engine.worker") > 0
    for record in scenario.outages.records:
        assert {"operation", "attempt", "retry_in_ms", "outage_ms", "error"} <= set(vars(record))
        assert 0 < record.retry_in_ms <= 400 * 1.2 + 1


async def test_every_execution_is_recoverable_by_replay_with_its_terminal_snapshot(
    scenario: FaultScenario,
) -> None:
    audit = scenario.services.audit
    for execution_id in await _execution_ids(scenario):
        assert await audit.snapshots.write_snapshot(execution_id) is not None
        validation = await audit.replay.validate(execution_id, TENANT)
        assert validation.valid, validation.reason
