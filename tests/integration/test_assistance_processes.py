"""Execution assistance over real runtime-instance processes (seed 001: local worker capacity
vs cross-instance assistance; issue 28.1).

A wide fan-out dispatched to one process is assisted by another: idle workers of the second
process join its ExecutionId under an assistance lease and complete part of its steps through
the same Lua transitions, every step completing exactly once (attempt records, Redis counters,
ledger) with the fingerprint of an unassisted run; the ledger, `run.status` and
`instances.list` name the assistant and its effective worker count. An instance dedicated to
another tenant never assists; a shared one does when the tenant's rules allow shared capacity.
An assistant SIGKILLed mid-run changes nothing but the speed.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from runtime_core.assistance import ASSISTING_INSTANCE_ATTRIBUTE
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.instances import HostedProcess, IsolationMode, LocalRunStatus
from tests.helpers import wait_until
from tests.integration.assistance_steps import attempts_by_step, open_gate
from tests.integration.assistance_support import (
    MAX_LOCAL_WORKERS_PER_EXECUTION,
    TENANT_A,
    TIMEOUT_S,
    WORKERS,
    Rig,
    assistance_rig,
    wide_fan_out,
)

WIDTH = 300
STEPS = WIDTH + 2


def _state(tmp_path: Path, delay_ms: int = 0) -> dict[str, object]:
    return {"attempts": str(tmp_path / "attempts.log"), "gate": str(tmp_path / "gate"), "delay_ms": delay_ms}


def _other_instance(processes: list[HostedProcess], owner: str) -> tuple[str, int]:
    """The one instance (and its process id) of these processes that does not own the run."""
    [(instance, pid)] = [
        (rid, hosted.pid) for hosted in processes for rid in hosted.runtime_instance_ids if rid != owner
    ]
    return instance, pid


async def _completed_count(rig: Rig, execution_id: str) -> int:
    """How many completions Redis accepted for the execution (one per step when none twice)."""
    found = await rig.plane.parts.dag_store.load_attributes(execution_id, "completed_count")
    return int(found["completed_count"] or 0)


async def test_a_wide_fan_out_is_assisted_by_a_second_process_and_every_step_completes_once(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    pipeline, state = wide_fan_out(WIDTH), _state(tmp_path)
    async with assistance_rig(redis_server, tmp_path) as rig:
        processes = [
            await rig.start_process("tenant-a", IsolationMode.DEDICATED, "tenant-a-runtime") for _ in range(2)
        ]
        idle = {view.runtime_instance_id: view for view in await rig.plane.list_instances(TENANT_A)}
        record = await rig.submit(pipeline, state)
        owner, execution_id = record.runtime_instance_id, record.execution_id
        assert execution_id is not None
        helper, helper_pid = _other_instance(processes, owner)
        await rig.wait_assisted_by(execution_id, helper)

        async def listed_assisting() -> bool:
            views = {view.runtime_instance_id: view for view in await rig.plane.list_instances(TENANT_A)}
            return views[helper].assisting_executions == 1

        await wait_until(listed_assisting, timeout=TIMEOUT_S, interval=0.02)
        assisting = {view.runtime_instance_id: view for view in await rig.plane.list_instances(TENANT_A)}[
            helper
        ]
        open_gate(state)
        final = await rig.wait_completed(record.shared_run_id)
        status = await rig.plane.run_status(record.shared_run_id, TENANT_A)
        view = await rig.plane.parts.dag_store.read_execution(execution_id)
        completed = await _completed_count(rig, execution_id)
        attempts = attempts_by_step(Path(str(state["attempts"])), execution_id)  # before the reference run's
        await rig.hosts.stop_all()  # their ledger batches are written on the way out
        entries = await rig.audit.queries.ledger(TENANT_A, execution_id=execution_id, limit=100_000)
        terminal = await rig.audit.queries.store.get_snapshot(execution_id, TENANT_A.tenant_id)
        await rig.retire_finished()
        retired = await rig.plane.parts.dag_store.load_meta(execution_id) is None
        archived = await rig.plane.run_status(record.shared_run_id, TENANT_A)
        reference = await rig.reference_fingerprint(pipeline, state, execution_id)

    # Assistance candidates advertise the effective count (the per-execution cap), not the raw one.
    assert {v.worker_count for v in idle.values()} == {WORKERS}
    assert {v.assistance_workers for v in idle.values()} == {MAX_LOCAL_WORKERS_PER_EXECUTION}
    assert (assisting.assisting_workers, assisting.worker_count) == (MAX_LOCAL_WORKERS_PER_EXECUTION, WORKERS)

    assert final.status is LocalRunStatus.COMPLETED and final.execution_id == execution_id
    assert final.local_run_id == record.local_run_id  # the owner ran it to its end
    assert view is not None and {step.status for step in view.steps} == {"Completed"}
    assert sorted(attempts) == sorted(step.name for step in pipeline.steps)
    assert {len(pids) for pids in attempts.values()} == {1}  # every step ran exactly once
    assert helper_pid in {pids[0] for pids in attempts.values()}
    assert completed == STEPS  # Redis accepted one completion per step

    completions = [e for e in entries if e.event == "step.completed"]
    assert Counter(e.step_name for e in completions) == Counter({step.name: 1 for step in pipeline.steps})
    assert {e.assigned_runtime_instance_id for e in entries} == {owner}
    by_helper = [e for e in completions if e.runtime_instance_id == helper]
    assert by_helper and all(e.attributes[ASSISTING_INSTANCE_ATTRIBUTE] == helper for e in by_helper)
    assert len(by_helper) == sum(1 for pids in attempts.values() if pids == [helper_pid])
    [joined] = [e for e in entries if e.event == "execution.assistance_joined"]
    left = [e for e in entries if e.event == "execution.assistance_left"]
    assert joined.runtime_instance_id == helper
    assert joined.attributes["workers"] == MAX_LOCAL_WORKERS_PER_EXECUTION
    assert sum(e.attributes["steps_completed"] for e in left) == len(by_helper)

    [assistant] = status.assistants
    assert (assistant.runtime_instance_id, assistant.effective_workers) == (
        helper,
        MAX_LOCAL_WORKERS_PER_EXECUTION,
    )
    assert status.effective_workers == MAX_LOCAL_WORKERS_PER_EXECUTION
    # Once the run left Redis, run.status reads its assistants from the terminal snapshot.
    assert retired and [
        (a.runtime_instance_id, a.effective_workers, a.active) for a in archived.assistants
    ] == [(helper, MAX_LOCAL_WORKERS_PER_EXECUTION, False)]
    assert terminal is not None and terminal.fingerprint == reference  # the same as unassisted


async def test_a_dedicated_instance_of_another_tenant_never_assists_and_a_shared_one_does(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    pipeline, state = wide_fan_out(WIDTH), _state(tmp_path)
    async with assistance_rig(redis_server, tmp_path) as rig:
        own = await rig.start_process("tenant-a", IsolationMode.DEDICATED, "tenant-a-runtime")
        foreign = await rig.start_process("tenant-b", IsolationMode.DEDICATED, "tenant-b-runtime")
        record = await rig.submit(pipeline, state)  # only tenant A's own instance is visible to it
        assert record.execution_id is not None and record.runtime_instance_id in own.runtime_instance_ids
        shared = await rig.start_process("shared", IsolationMode.SHARED, "shared-runtime")
        [shared_instance] = shared.runtime_instance_ids
        await rig.wait_assisted_by(record.execution_id, shared_instance)
        open_gate(state)
        final = await rig.wait_completed(record.shared_run_id)
        assistants = await rig.assistants(record.execution_id)
        await rig.hosts.stop_all()
        entries = await rig.audit.queries.ledger(TENANT_A, execution_id=record.execution_id, limit=100_000)

    assert final.status is LocalRunStatus.COMPLETED
    assert [r.runtime_instance_id for r in assistants] == [shared_instance]  # tenant A allows shared capacity
    [foreign_instance] = foreign.runtime_instance_ids
    assert foreign_instance not in {e.runtime_instance_id for e in entries}
    attempts = attempts_by_step(Path(str(state["attempts"])), record.execution_id)
    pids = {pid for made in attempts.values() for pid in made}
    assert foreign.pid not in pids and shared.pid in pids
    assert {len(made) for made in attempts.values()} == {1}


async def test_an_assistant_killed_mid_run_changes_nothing_but_the_speed(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    # Steps of 20 ms: the assistant, killed after 10 attempts, still holds claims.
    pipeline, state = wide_fan_out(WIDTH), _state(tmp_path, delay_ms=20)
    attempts_file = Path(str(state["attempts"]))
    async with assistance_rig(redis_server, tmp_path) as rig:
        processes = [
            await rig.start_process("tenant-a", IsolationMode.DEDICATED, "tenant-a-runtime") for _ in range(2)
        ]
        record = await rig.submit(pipeline, state)
        assert record.execution_id is not None
        helper, helper_pid = _other_instance(processes, record.runtime_instance_id)
        await rig.wait_assisted_by(record.execution_id, helper)
        open_gate(state)

        async def helper_mid_run() -> bool:
            made = attempts_by_step(attempts_file, record.execution_id)
            return sum(pids.count(helper_pid) for pids in made.values()) >= 10

        await wait_until(helper_mid_run, timeout=TIMEOUT_S, interval=0.01)
        [killed] = [hosted for hosted in processes if hosted.pid == helper_pid]
        assert await rig.hosts.kill_host(killed.host_id) == -9
        final = await rig.wait_completed(record.shared_run_id)
        view = await rig.plane.parts.dag_store.read_execution(record.execution_id)
        completed = await _completed_count(rig, record.execution_id)
        assistants = await rig.assistants(record.execution_id)
        now_ms = await rig.hot_state.server_time_ms()

    assert final.status is LocalRunStatus.COMPLETED
    assert (final.execution_id, final.local_run_id) == (record.execution_id, record.local_run_id)
    assert view is not None and {(s.status, s.retry_count) for s in view.steps} == {("Completed", 0)}
    assert completed == STEPS  # no step completed twice
    attempts = attempts_by_step(attempts_file, record.execution_id)
    recovered = {s.name: s.recovery_count for s in view.steps}
    assert sorted(attempts) == sorted(recovered)
    for name, pids in attempts.items():
        # A second attempt only for a step the killed assistant held: taken back by stale-running recovery.
        assert len(pids) == 1 or (pids[0] == helper_pid and len(pids) - 1 <= recovered[name]), (name, pids)
        assert helper_pid not in pids[1:]
    assert any(len(pids) > 1 for pids in attempts.values()) or any(recovered.values())
    [assistant] = assistants
    assert assistant.runtime_instance_id == helper and assistant.left_at_ms is None  # it never left
    assert not assistant.active(now_ms)  # its lease lapsed
    assert os.getpid() not in {pid for pids in attempts.values() for pid in pids}
