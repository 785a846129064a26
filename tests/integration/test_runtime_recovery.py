"""Seed 000 runtime health and process crash recovery, in-process: one test per scenario row.

A crash is simulated as a killed process leaves things: the instance's heartbeat and workers
stop, its registry record, run-execution index records and DAG state stay in Redis.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.audit import fingerprint_view
from runtime_core.dag import execution_fingerprint
from runtime_core.errors import FencedError
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.identity import new_execution_id
from runtime_core.instances import AdmissionKind, InstanceHealth, LocalRunStatus
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import ScaleOutStatus, SharedRunStatus, SubmitMode
from runtime_core.recovery import RecoveryAction, RecoveryKind, release_execution_claims
from runtime_core.storage import SqliteDurableStore
from tests.helpers import CountingExecutor, wait_until
from tests.integration.control_plane_support import ONE_STEP, TENANT_A, TENANT_B, GateExecutor
from tests.integration.recovery_support import (
    RESUMABLE,
    TENANT_C,
    InFlight,
    Rig,
    crash,
    latest_record,
    live_view,
    make_engine,
    mark_unsafe,
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
    built = recovery_rig(hot_state, durable)
    yield built
    await built.plane.stop()


async def crashed_in_flight(rig: Rig) -> InFlight:
    """Tenant A's execution is past `f` and holds at `hold` when its instance dies; a
    replacement exists, recovery has run, the gate is open and the run completed."""
    dead = await tenant_instance(rig, TENANT_A, n=1)
    in_flight = await start_in_flight(rig, TENANT_A)
    await crash(dead)
    await mark_unsafe(rig, dead)
    await tenant_instance(rig, TENANT_A, n=2)
    await rig.plane.parts.recovery.reconcile_once()
    rig.gate.release()
    await wait_completed(rig, [in_flight.shared_run_id])
    return in_flight


# Health


async def test_heartbeat_lapse_marks_instance_unsafe_and_admission_skips_it_at_once(rig: Rig) -> None:
    dead = await tenant_instance(rig, TENANT_A, n=1)
    alive = await tenant_instance(rig, TENANT_A, n=2)
    await crash(dead)
    await mark_unsafe(rig, dead)

    decision = await rig.plane.parts.admission.admit(TENANT_A)
    entries = {e.runtime_instance_id: e for e in await rig.plane.parts.registry.entries()}
    assert decision.kind is AdmissionKind.ASSIGN_TO_INSTANCE
    assert [c.runtime_instance_id for c in decision.candidates] == [alive.runtime_instance_id]
    assert entries[dead.runtime_instance_id].health is InstanceHealth.UNSAFE
    assert entries[alive.runtime_instance_id].health is InstanceHealth.HEALTHY
    # The registry's own staleness rule (10 s) has not fired yet: the Unsafe mark excludes it.
    assert rig.plane.parts.registry.stale_after_ms > 1_000


async def test_health_reconciler_never_touches_assigned_work(rig: Rig) -> None:
    dead = await tenant_instance(rig, TENANT_A, n=1)
    in_flight = await start_in_flight(rig, TENANT_A)
    await dead.pause_queue()
    queued = await queue_locally(rig, dead, TENANT_A)
    await crash(dead)
    await mark_unsafe(rig, dead)

    parts = rig.plane.parts
    view = await live_view(rig, in_flight.execution_id)
    assert {s.name: s.status for s in view.steps}["hold"] == "Running"
    for shared_run_id in (in_flight.shared_run_id, queued):
        run = await parts.runs.get(shared_run_id)
        assert run is not None and run.status is SharedRunStatus.DISPATCHED
        assert run.assigned_runtime_instance_id == dead.runtime_instance_id
    assert len(await parts.index.assigned_to(dead.runtime_instance_id)) == 2


# In-flight execution recovery


async def test_in_flight_execution_resumes_on_replacement_with_the_same_execution_id(rig: Rig) -> None:
    in_flight = await crashed_in_flight(rig)

    final = await latest_record(rig, in_flight.shared_run_id)
    assert final.execution_id == in_flight.execution_id
    assert final.local_run_id != in_flight.local_run_id
    assert final.runtime_instance_id.endswith(":tenant-a-runtime-2")
    assert (await live_view(rig, in_flight.execution_id)).meta.status == "Completed"


async def test_completed_steps_are_not_re_executed_after_resume(rig: Rig) -> None:
    in_flight = await crashed_in_flight(rig)

    calls = {step: n for (execution_id, step), n in rig.counter.calls.items()}
    assert calls == {"a": 1, "b1": 1, "b2": 1, "z": 1}
    assert all(execution_id == in_flight.execution_id for execution_id, _ in rig.counter.calls)


async def test_recovery_does_not_consume_retry_budget(rig: Rig) -> None:
    in_flight = await crashed_in_flight(rig)

    steps = {s.name: s for s in (await live_view(rig, in_flight.execution_id)).steps}
    assert {name: s.retry_count for name, s in steps.items()} == {
        "a": 0,
        "f": 1,
        "hold": 0,
        "b1": 0,
        "b2": 0,
        "z": 0,
    }
    assert steps["hold"].recovery_count == 1


async def test_recovered_execution_fingerprint_equals_an_uncrashed_run(rig: Rig, redis_target) -> None:
    in_flight = await crashed_in_flight(rig)
    recovered = await fingerprint_view(await live_view(rig, in_flight.execution_id), rig.audit.resolver)

    reference_state = connect_hot_state(redis_target.url, prefix=f"ref{secrets.token_hex(4)}:")
    try:
        gate = GateExecutor()
        gate.release()
        engine, _ = make_engine(reference_state, CountingExecutor(), gate)
        await engine.create_execution(RESUMABLE, {}, TENANT_A, execution_id=in_flight.execution_id)
        assert await engine.run(in_flight.execution_id, workers=1) == "Completed"
        reference = await engine.store.read_execution(in_flight.execution_id)
        assert reference is not None
        assert recovered == execution_fingerprint(reference)
    finally:
        await reference_state.close()


async def test_strict_replay_validation_passes_for_a_recovered_execution(rig: Rig) -> None:
    in_flight = await crashed_in_flight(rig)

    validation = await rig.audit.replay.validate(in_flight.execution_id, TENANT_A)
    assert validation.valid, validation.reason


async def test_ledger_entries_after_a_resume_carry_the_new_local_run_id_and_earlier_ones_the_old(
    rig: Rig,
) -> None:
    """Same process, same ledger recorder for both attempts: its cached run identity is renewed."""
    in_flight = await crashed_in_flight(rig)
    new = (await latest_record(rig, in_flight.shared_run_id)).local_run_id

    entries = await rig.audit.queries.ledger(TENANT_A, execution_id=in_flight.execution_id, limit=1000)
    engine_entries = [e for e in entries if not e.event.startswith("runtime.recovery.")]
    events = [e.event for e in engine_entries]
    resumed_at = events.index("execution.reassigned")
    assert {e.local_run_id for e in engine_entries[:resumed_at]} == {in_flight.local_run_id}
    assert {e.local_run_id for e in engine_entries[resumed_at:]} == {new}
    assert engine_entries[resumed_at].attributes["previous"]["local_run_id"] == in_flight.local_run_id
    completed_by = {e.step_name: e.local_run_id for e in engine_entries if e.event == "step.completed"}
    assert completed_by == {
        "a": in_flight.local_run_id,
        "f": in_flight.local_run_id,
        "hold": new,
        "b1": new,
        "b2": new,
        "z": new,
    }
    # The recovery evidence describes the dead attempt, so it keeps the old LocalRunId.
    evidence = [e for e in entries if e.event.startswith("runtime.recovery.")]
    assert evidence and {e.local_run_id for e in evidence} == {in_flight.local_run_id}


async def test_recovery_releases_claims_by_claim_time_whatever_lease_they_were_made_with(
    rig: Rig,
) -> None:
    """A dead process's claim is released however long its lease; a later claim is kept however
    short: the release never depends on the recovering side knowing the claimer's lease."""
    store, hot_state = rig.plane.parts.dag_store, rig.plane.parts.hot_state
    pipeline = parse_pipeline(
        {
            "name": "two-roots",
            "steps": [{"name": "dead", "stepKey": "test.noop"}, {"name": "later", "stepKey": "test.noop"}],
        }
    )
    execution_id = await rig.plane.parts.engine.create_execution(pipeline, {}, TENANT_A)
    claim = {"worker_id": "lease-test", "token_prefix": "lease"}
    await store.claim_step(execution_id, "dead", lease_ms=3_600_000, **claim)
    cutoff = await hot_state.server_time_ms()

    async def past_cutoff() -> bool:
        return await hot_state.server_time_ms() > cutoff

    await wait_until(past_cutoff)
    await store.claim_step(execution_id, "later", lease_ms=100, **claim)

    released = await release_execution_claims(store, execution_id, claimed_before_ms=cutoff)

    view = await live_view(rig, execution_id)
    assert released == ["dead"]
    assert {s.name: (s.status, s.owned, s.recovery_count) for s in view.steps} == {
        "dead": ("Ready", False, 1),
        "later": ("Running", True, 0),
    }


# Local-queued run recovery


async def test_local_queued_run_is_redispatched_with_the_same_shared_run_id_and_a_new_local_run_id(
    rig: Rig,
) -> None:
    dead = await tenant_instance(rig, TENANT_A, n=1)
    await dead.pause_queue()
    shared_run_id = await queue_locally(rig, dead, TENANT_A)
    old = await latest_record(rig, shared_run_id)
    await crash(dead)
    await mark_unsafe(rig, dead)
    await tenant_instance(rig, TENANT_A, n=2)

    [item] = await rig.plane.parts.recovery.reconcile_once()
    await wait_completed(rig, [shared_run_id])

    new = await latest_record(rig, shared_run_id)
    assert item.kind is RecoveryKind.LOCAL_QUEUED
    assert item.action is RecoveryAction.REQUEUED_FOR_REDISPATCH
    assert old.execution_id is None
    assert new.shared_run_id == shared_run_id and new.local_run_id != old.local_run_id
    assert new.runtime_instance_id.endswith(":tenant-a-runtime-2")
    closed = await rig.plane.parts.index.get_local(old.local_run_id)
    assert closed is not None and closed.status is LocalRunStatus.FAILED


async def test_an_execution_id_given_up_before_its_dag_existed_stays_refused_only_for_the_fence_retention(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    fence_retention_ms = 60_000
    rig = recovery_rig(hot_state, durable, fence_retention_ms=fence_retention_ms)
    try:
        dead = await tenant_instance(rig, TENANT_A, n=1)
        await dead.pause_queue()
        shared_run_id = await queue_locally(rig, dead, TENANT_A)
        # What the instance records when it starts the run, before creating its DAG; it dies there.
        execution_id = new_execution_id()
        started = await latest_record(rig, shared_run_id)
        await rig.plane.parts.index.update(started, status=LocalRunStatus.RUNNING, execution_id=execution_id)
        await crash(dead)
        await mark_unsafe(rig, dead)
        await tenant_instance(rig, TENANT_A, n=2)

        [item] = await rig.plane.parts.recovery.reconcile_once()

        assert item.action is RecoveryAction.REQUEUED_FOR_REDISPATCH
        with pytest.raises(FencedError):  # the dead instance's late creation, were it a zombie
            await rig.plane.parts.engine.create_execution(ONE_STEP, {}, TENANT_A, execution_id=execution_id)
        tombstone = rig.plane.parts.dag_store.keys(execution_id).fenced
        assert 0 < await hot_state.redis.pttl(tombstone) <= fence_retention_ms
        await wait_completed(rig, [shared_run_id])
    finally:
        await rig.plane.stop()


# Tenant scope


async def test_without_tenant_visible_capacity_recovery_requests_scale_out_for_the_tenant(rig: Rig) -> None:
    dead = await tenant_instance(rig, TENANT_A, n=1)
    in_flight = await start_in_flight(rig, TENANT_A)
    await tenant_instance(rig, TENANT_B, n=1)
    await crash(dead)
    await mark_unsafe(rig, dead)

    [item] = await rig.plane.parts.recovery.reconcile_once()

    run = await rig.plane.parts.runs.get(in_flight.shared_run_id)
    assert item.action is RecoveryAction.SCALE_OUT_REQUESTED and item.scale_out_request_id
    assert run is not None and run.status is SharedRunStatus.SCALE_OUT_REQUESTED
    assert run.resume_execution_id == in_flight.execution_id
    request = await rig.plane.parts.scale_out.get(item.scale_out_request_id)
    assert request is not None and request.tenant_id == TENANT_A.tenant_id
    assert request.tenant_settings.runtime_instance_id_prefix == "tenant-a-runtime"

    [handled] = await rig.plane.parts.watcher.process_pending()
    rig.gate.release()
    await wait_completed(rig, [in_flight.shared_run_id])
    final = await latest_record(rig, in_flight.shared_run_id)
    assert handled.status is ScaleOutStatus.FULFILLED
    assert final.runtime_instance_id == handled.fulfilled_runtime_instance_id
    assert final.execution_id == in_flight.execution_id


async def test_tenant_a_recovery_never_lands_on_tenant_b_capacity(rig: Rig) -> None:
    dead = await tenant_instance(rig, TENANT_A, n=1)
    in_flight = await start_in_flight(rig, TENANT_A)
    await dead.pause_queue()
    queued = [await queue_locally(rig, dead, TENANT_A) for _ in range(2)]
    tenant_b = await tenant_instance(rig, TENANT_B, n=1)
    await crash(dead)
    await mark_unsafe(rig, dead)

    await rig.plane.parts.recovery.reconcile_once()
    await rig.plane.parts.watcher.process_pending()
    rig.gate.release()
    await wait_completed(rig, [in_flight.shared_run_id, *queued])

    assert tenant_b.local_runs() == []
    for shared_run_id in (in_flight.shared_run_id, *queued):
        record = await latest_record(rig, shared_run_id)
        assert record.runtime_instance_id.endswith(":tenant-a-runtime-2")


async def test_recovery_is_scoped_to_unsafe_instances_with_forensics_per_item_and_none_for_a_safe_tenant(
    rig: Rig,
) -> None:
    """Tenants A and B: 1 in-flight + 2 local-queued each when killed; tenant C stays alive."""
    work: dict[str, list[str]] = {}
    dead = {}
    for snapshot in (TENANT_A, TENANT_B):
        dead[snapshot.tenant_id] = instance = await tenant_instance(rig, snapshot, n=1)
        in_flight = await start_in_flight(rig, snapshot)
        await instance.pause_queue()
        work[snapshot.tenant_id] = [in_flight.shared_run_id] + [
            await queue_locally(rig, instance, snapshot) for _ in range(2)
        ]
    await tenant_instance(rig, TENANT_C, n=1)
    for instance in dead.values():
        await crash(instance)
    for instance in dead.values():
        await mark_unsafe(rig, instance)
    safe = [
        (await rig.plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT_C)).shared_run_id
        for _ in range(3)
    ]

    items = await rig.plane.parts.recovery.reconcile_once()
    await rig.plane.parts.watcher.process_pending()
    rig.gate.release()
    await wait_completed(rig, [*work["tenant-a"], *work["tenant-b"], *safe])

    recovered = {t: sorted(i.shared_run_id or "" for i in items if i.tenant_id == t) for t in work}
    assert recovered == {t: sorted(ids) for t, ids in work.items()}
    assert not [i for i in items if i.tenant_id == TENANT_C.tenant_id]
    queries = rig.audit.queries
    for snapshot, expected in ((TENANT_A, 3), (TENANT_B, 3), (TENANT_C, 0)):
        forensics = await queries.forensics(snapshot)
        ledger = await queries.ledger(snapshot, limit=1000)
        recovery_entries = [e for e in ledger if e.event.startswith("runtime.recovery.")]
        assert len(forensics) == expected and len(recovery_entries) == expected
        own = set(work.get(snapshot.tenant_id, safe))
        assert {e.shared_run_id for e in ledger if e.shared_run_id} <= own
    kinds = sorted(r.kind for r in await queries.forensics(TENANT_A))
    assert kinds == ["InFlightExecution", "LocalQueued", "LocalQueued"]
    for shared_run_id in safe:
        assert (await latest_record(rig, shared_run_id)).runtime_instance_id.endswith(":tenant-c-runtime-1")


# Exactly once and closure


async def test_two_concurrent_reconcilers_recover_each_item_once(
    rig: Rig, hot_state: HotState, durable: SqliteDurableStore
) -> None:
    dead = await tenant_instance(rig, TENANT_A, n=1)
    in_flight = await start_in_flight(rig, TENANT_A)
    await dead.pause_queue()
    queued = [await queue_locally(rig, dead, TENANT_A) for _ in range(2)]
    await tenant_instance(rig, TENANT_A, n=2)
    await crash(dead)
    await mark_unsafe(rig, dead)
    other = recovery_rig(hot_state, durable, host="otherhost")

    first, second = await asyncio.gather(
        rig.plane.parts.recovery.reconcile_once(), other.plane.parts.recovery.reconcile_once()
    )

    recovered = sorted(i.shared_run_id or "" for i in [*first, *second])
    assert recovered == sorted([in_flight.shared_run_id, *queued])
    assert len(await rig.audit.queries.forensics(TENANT_A)) == 3


async def test_recovered_instance_is_marked_recovered_and_its_capacity_removed(rig: Rig) -> None:
    dead = await tenant_instance(rig, TENANT_A, n=1)
    await start_in_flight(rig, TENANT_A)
    await crash(dead)
    await mark_unsafe(rig, dead)

    await rig.plane.parts.recovery.reconcile_once()

    hot_state = rig.plane.parts.hot_state
    keys = rig.plane.parts.registry.keys(dead.runtime_instance_id)
    assert await hot_state.redis.hget(keys.registry, "health") == InstanceHealth.RECOVERED
    assert await hot_state.redis.exists(keys.capacity) == 0
    assert dead.runtime_instance_id not in [
        e.runtime_instance_id for e in await rig.plane.parts.registry.entries()
    ]
    assert await rig.plane.parts.recovery.reconcile_once() == []


async def test_background_reconcilers_of_a_started_control_plane_recover_a_crashed_instance(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = recovery_rig(
        hot_state, durable, background_pump=True, health_check_interval_ms=50, recovery_interval_ms=50
    )
    await rig.plane.start()
    try:
        dead = await tenant_instance(rig, TENANT_A, n=1)
        in_flight = await start_in_flight(rig, TENANT_A)
        await tenant_instance(rig, TENANT_A, n=2)
        await crash(dead)
        rig.gate.release()

        async def resumed() -> bool:
            record = await rig.plane.parts.index.get_by_shared(in_flight.shared_run_id)
            return record is not None and record.status is LocalRunStatus.COMPLETED

        await wait_until(resumed, timeout=15)
        assert (await latest_record(rig, in_flight.shared_run_id)).execution_id == in_flight.execution_id
    finally:
        await rig.plane.stop()
