"""Issue 13.1, 13.4: registration is not identity. Each start of a runtime instance is a new
incarnation; health and recovery judge incarnations, in-process and deterministic here (the
reconcilers' passes are run by the tests).

- A new incarnation takes its id over: never marked Unsafe for its predecessor's silence, its
  heartbeat versions start afresh, the predecessor's heartbeats are refused (it is fenced).
- The predecessor's work (a restart after SIGKILL) is recovered onto the new incarnation:
  in-flight executions resume with their ExecutionId, queued runs are dispatched again.
- A clean stop with unfinished runs (SIGTERM) hands them to recovery at once.
- `done` tells the truth in between: a failed attempt of a requeued run is not done.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.control_plane import run_is_done
from runtime_core.hot_state import HotState
from runtime_core.instances import InstanceHealth, RuntimeInstance
from runtime_core.queueing import SharedRunStatus
from runtime_core.recovery import RecoveryAction, RecoveryKind, RecoveryReports
from runtime_core.storage import SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.recovery_support import (
    HEALTH_WINDOW_MS,
    TENANT_C,
    Rig,
    crash,
    latest_record,
    live_view,
    queue_locally,
    recovery_rig,
    start_in_flight,
    tenant_instance,
    wait_completed,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[SqliteDurableStore]:
    store = await SqliteDurableStore.open(tmp_path / "runtime.db")
    yield store
    await store.close()


@pytest.fixture
async def rig(hot_state: HotState, durable: SqliteDurableStore) -> AsyncIterator[Rig]:
    built = recovery_rig(hot_state, durable, reservation_ttl_ms=200)  # predecessor grace: 200 ms
    yield built
    await built.plane.stop()


async def restart(rig: Rig, crashed: RuntimeInstance) -> RuntimeInstance:
    """The same runtime instance id started again (a new process would): a new incarnation."""
    return await rig.plane.parts.pool.restart_instance(crashed.runtime_instance_id)


async def test_a_new_incarnation_takes_the_id_over_and_is_never_marked_unsafe_for_its_predecessor(
    rig: Rig,
) -> None:
    parts = rig.plane.parts
    dead = await tenant_instance(rig, TENANT_C)
    capacity_key = parts.registry.keys(dead.runtime_instance_id).capacity

    async def many_heartbeats() -> bool:
        return int(await parts.hot_state.redis.hget(capacity_key, "version") or 0) >= 10

    await wait_until(many_heartbeats, timeout=10)
    await crash(dead)
    successor = await restart(rig, dead)
    marked: list[str] = []

    async def three_health_windows_of_passes() -> bool:
        marked.extend(await parts.health.reconcile_once())
        now = await parts.hot_state.server_time_ms()
        return now - successor_started >= 3 * HEALTH_WINDOW_MS

    successor_started = await parts.hot_state.server_time_ms()
    await wait_until(three_health_windows_of_passes, timeout=10, interval=0.02)
    [entry] = await parts.registry.entries()
    stored = await parts.hot_state.redis.hmget(capacity_key, ["incarnation", "version"])
    assert marked == [] and entry.live and entry.health is InstanceHealth.HEALTHY
    assert entry.descriptor.incarnation == successor.incarnation != dead.incarnation
    assert stored[0] == successor.incarnation and int(stored[1]) < 10 + 3 * HEALTH_WINDOW_MS // 50
    await dead.publish()  # a heartbeat of the predecessor (a zombie): refused, it fences itself
    assert dead.fenced is not None and "superseded" in dead.fenced
    assert (await parts.registry.entries())[0].descriptor.incarnation == successor.incarnation


async def test_a_restarted_instance_resumes_its_predecessors_in_flight_execution_with_the_same_id(
    rig: Rig,
) -> None:
    parts = rig.plane.parts
    dead = await tenant_instance(rig, TENANT_C)
    in_flight = await start_in_flight(rig, TENANT_C)
    await crash(dead)
    successor = await restart(rig, dead)
    [item] = await parts.recovery.reconcile_once()
    assert (item.kind, item.action) == (RecoveryKind.IN_FLIGHT_EXECUTION, RecoveryAction.REQUEUED_FOR_RESUME)
    assert item.incarnation == dead.incarnation and "superseded" in item.reason

    rig.gate.release()
    await wait_completed(rig, [in_flight.shared_run_id])
    final = await latest_record(rig, in_flight.shared_run_id)
    assert final.execution_id == in_flight.execution_id
    assert final.incarnation == successor.incarnation
    assert (await live_view(rig, in_flight.execution_id)).meta.status == "Completed"
    assert rig.counter.calls[(in_flight.execution_id, "a")] == 1
    [incident] = (await RecoveryReports(rig.audit.queries).report(TENANT_C)).incidents
    assert (incident.cause, incident.incarnation) == ("process_restarted", dead.incarnation)
    [run] = incident.runs
    assert (run.outcome.value, run.execution_id, run.final_status) == (
        "resumed",
        in_flight.execution_id,
        "Completed",
    )

    predecessors = parts.registry.keys(dead.runtime_instance_id).predecessors

    async def predecessor_forgotten_after_the_grace() -> bool:
        await parts.recovery.reconcile_once()
        return not await parts.hot_state.redis.exists(predecessors)

    await wait_until(predecessor_forgotten_after_the_grace, timeout=10, interval=0.05)


async def test_a_restarted_instance_dispatches_its_predecessors_queued_run_again(rig: Rig) -> None:
    parts = rig.plane.parts
    dead = await tenant_instance(rig, TENANT_C)
    await dead.pause_queue()
    queued = await queue_locally(rig, dead, TENANT_C)
    dead_record = await latest_record(rig, queued)
    await crash(dead)
    successor = await restart(rig, dead)
    [item] = await parts.recovery.reconcile_once()
    assert item.action is RecoveryAction.REQUEUED_FOR_REDISPATCH

    await wait_completed(rig, [queued])
    final = await latest_record(rig, queued)
    assert final.local_run_id != dead_record.local_run_id and final.incarnation == successor.incarnation
    sealed = await parts.index.get_local(dead_record.local_run_id)
    assert sealed is not None and sealed.taken_over_by and sealed.status.is_terminal


async def test_a_cleanly_stopped_instance_hands_its_unfinished_runs_to_recovery_at_once(rig: Rig) -> None:
    """SIGTERM: no health window to wait for; recovery takes the in-flight run over now."""
    parts = rig.plane.parts
    stopping = await tenant_instance(rig, TENANT_C, n=1)
    in_flight = await start_in_flight(rig, TENANT_C)
    await stopping.stop()
    registry = await parts.hot_state.redis.hmget(
        parts.registry.keys(stopping.runtime_instance_id).registry, ["health", "unsafe_reason"]
    )
    assert registry == [InstanceHealth.UNSAFE, "stopped"]

    await tenant_instance(rig, TENANT_C, n=2)
    [item] = await parts.recovery.reconcile_once()
    assert item.action is RecoveryAction.REQUEUED_FOR_RESUME
    rig.gate.release()
    await wait_completed(rig, [in_flight.shared_run_id])
    final = await latest_record(rig, in_flight.shared_run_id)
    assert final.execution_id == in_flight.execution_id


async def test_an_idle_cleanly_stopped_instance_leaves_no_registration(rig: Rig) -> None:
    idle = await tenant_instance(rig, TENANT_C)
    await idle.stop()
    assert await rig.plane.parts.registry.entries() == []


async def test_a_failed_attempt_of_a_requeued_run_is_not_done(rig: Rig) -> None:
    parts = rig.plane.parts
    dead = await tenant_instance(rig, TENANT_C)
    in_flight = await start_in_flight(rig, TENANT_C)
    await crash(dead)
    await restart(rig, dead)
    await parts.recovery.reconcile_once()

    between = await rig.plane.run_status(in_flight.shared_run_id, TENANT_C)
    assert between.shared_status == SharedRunStatus.QUEUED_GLOBALLY.value
    assert between.local_status == "Failed" and not run_is_done(between)

    rig.gate.release()
    await wait_completed(rig, [in_flight.shared_run_id])
    after = await rig.plane.run_status(in_flight.shared_run_id, TENANT_C)
    assert run_is_done(after) and after.execution_status == "Completed" and after.local_status == "Completed"
