"""Seed 001 worker capacity and seed 003 controller queue control on an in-process runtime instance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import ConflictError, MissingSnapshotError, NotFoundError
from runtime_core.hot_state import HotState
from runtime_core.instances import (
    ABANDONED_ATTEMPT,
    DISPATCH_ATTEMPT_KEY,
    LocalRunRequest,
    LocalRunStatus,
    RuntimeInstance,
)
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.queueing import SharedRunStatus, SubmitMode
from runtime_core.steps import StepInvocation
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    GATED,
    ONE_STEP,
    GateExecutor,
    control_plane,
    standalone_instance,
    start_instance,
)

SEED_CAPACITY_FIELDS = {
    "worker_count",
    "active_workers",
    "available_workers",
    "max_local_workers_per_execution",
    "queued",
    "running",
    "active_runs",
    "queue_capacity",
    "max_concurrent_runs",
    "available_run_slots",
    "queue_paused",
    "can_accept_run",
    "last_heartbeat_at_ms",
    "tenant_id",
    "tenant_group_id",
    "isolation_mode",
    "prefer_dedicated_capacity",
    "allow_shared_fallback",
    "provider_name",
    "provider_endpoint",
    "role",
    "status",
}


def request(pipeline: PipelineDefinition = ONE_STEP) -> LocalRunRequest:
    return LocalRunRequest(pipeline=pipeline, input={}, snapshot=DEFAULT_TENANT)


async def started(plane: ControlPlane, **settings: object) -> RuntimeInstance:
    return await standalone_instance(plane, **settings).start()


async def test_instance_list_exposes_every_worker_and_capacity_field(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await start_instance(plane, worker_count=6, max_local_workers_per_execution=2)
    try:
        [view] = await plane.list_instances(DEFAULT_TENANT)
        assert SEED_CAPACITY_FIELDS <= set(view.model_dump())
        assert view.runtime_instance_id == instance.runtime_instance_id
        assert (view.worker_count, view.active_workers, view.available_workers) == (6, 0, 6)
        assert view.max_local_workers_per_execution == 2
        assert view.can_accept_run and view.live and view.provider_name == "local"
        assert view.provider_endpoint == f"inproc://{instance.runtime_instance_id}"
    finally:
        await plane.stop()


def _wide(name: str, width: int) -> PipelineDefinition:
    return parse_pipeline(
        {"name": name, "steps": [{"name": f"g{i}", "stepKey": "test.gate"} for i in range(width)]}
    )


async def _running(instance: RuntimeInstance, local_run_id: str) -> bool:
    view = instance.run_view(local_run_id)
    return view.status is LocalRunStatus.RUNNING and view.execution_id is not None


async def test_busy_workers_leave_can_accept_run_true_while_a_run_slot_is_free(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane, worker_count=2, max_local_workers_per_execution=2, max_concurrent_runs=2)
    try:
        first = await instance.enqueue(request(_wide("wide", 4)))
        await wait_until(lambda: _true(gate.started == 2))
        capacity = instance.capacity()
        assert (capacity.active_workers, capacity.available_workers) == (2, 0)
        assert capacity.available_run_slots == 1 and capacity.can_accept_run is True
        [view] = await plane.list_instances(DEFAULT_TENANT)
        assert view.can_accept_run is True and view.available_run_slots == 1

        second = await instance.enqueue(request(ONE_STEP))  # starts: its step waits for a worker
        await wait_until(lambda: _running(instance, second.local_run_id))
        assert instance.capacity().can_accept_run is False  # no run slot left
        assert gate.started == 2 and instance.run_view(second.local_run_id).status is LocalRunStatus.RUNNING
        gate.release()
        finals = [await instance.wait_for_run(r.local_run_id, timeout=10) for r in (first, second)]
        assert [f.status for f in finals] == [LocalRunStatus.COMPLETED] * 2
    finally:
        gate.release()
        await instance.stop()


async def test_an_instance_runs_as_many_wide_runs_at_once_as_it_has_run_slots(hot_state: HotState) -> None:
    """Capacity that adds up: 4 slots and 4 workers run 4 wide runs at once, not one."""
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane, worker_count=4, max_local_workers_per_execution=4, max_concurrent_runs=4)
    try:
        views = [await instance.enqueue(request(_wide(f"wide{n}", 8))) for n in range(4)]
        for view in views:
            await wait_until(lambda view=view: _running(instance, view.local_run_id))
        await wait_until(lambda: _true(gate.started == 4))
        capacity = instance.capacity()
        assert (capacity.running, capacity.queued, capacity.active_workers) == (4, 0, 4)
        assert capacity.can_accept_run is False
        gate.release()
        finals = [await instance.wait_for_run(v.local_run_id, timeout=20) for v in views]
        assert [f.status for f in finals] == [LocalRunStatus.COMPLETED] * 4
        assert sum(gate.max_active.values()) >= 4 and max(gate.max_active.values()) <= 4
        assert instance.capacity().active_workers == 0
    finally:
        gate.release()
        await instance.stop()


async def test_workers_a_run_leaves_idle_run_another_runs_steps(hot_state: HotState) -> None:
    """A run with one ready step holds one worker; its other engine workers hold none."""
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane, worker_count=4, max_local_workers_per_execution=4, max_concurrent_runs=2)
    try:
        narrow = await instance.enqueue(request(GATED))
        await wait_until(lambda: _true(gate.started == 1))
        wide = await instance.enqueue(request(_wide("wide", 6)))
        await wait_until(lambda: _true(gate.started == 4))
        assert instance.capacity().active_workers == 4
        wide_execution = instance.run_view(wide.local_run_id).execution_id
        assert gate.max_active[wide_execution] == 3
        gate.release()
        finals = [await instance.wait_for_run(r.local_run_id, timeout=10) for r in (narrow, wide)]
        assert [f.status for f in finals] == [LocalRunStatus.COMPLETED] * 2
        assert [f.effective_workers for f in finals] == [4, 4]
    finally:
        gate.release()
        await instance.stop()


class RecordingExecutor:
    """`test.record`: notes (execution id, step) in the order steps ran."""

    step_key = "test.record"

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.ran.append((invocation.execution_id, invocation.step_name))
        return {"data": {}}


async def test_a_worker_hands_its_permit_to_another_runs_waiting_step(hot_state: HotState) -> None:
    """One worker, a long run and a short one: once the short run's worker waits, the long
    run's worker hands the permit on after its current round instead of running all its steps."""
    gate, recorder = GateExecutor(), RecordingExecutor()
    plane = control_plane(hot_state, gate, recorder)
    instance = await started(plane, worker_count=1, max_local_workers_per_execution=1, max_concurrent_runs=2)
    fan = [{"name": f"r{i}", "stepKey": "test.record", "dependsOn": ["hold"]} for i in range(20)]
    long = parse_pipeline({"name": "long", "steps": [{"name": "hold", "stepKey": "test.gate"}, *fan]})
    short = parse_pipeline({"name": "short", "steps": [{"name": "only", "stepKey": "test.record"}]})
    instance._permits.time_slice_s = 0.0  # hand on at the first report (the slice is tested apart)
    try:
        first = await instance.enqueue(request(long))
        await wait_until(lambda: _true(gate.started == 1))
        second = await instance.enqueue(request(short))
        await wait_until(lambda: _true(instance._permits.contended))  # its worker waits for the permit
        gate.release()
        finals = [await instance.wait_for_run(r.local_run_id, timeout=10) for r in (first, second)]
        assert [f.status for f in finals] == [LocalRunStatus.COMPLETED] * 2
        assert recorder.ran[0] == (finals[1].execution_id, "only")
        assert len(recorder.ran) == 21
    finally:
        gate.release()
        await instance.stop()


async def test_max_local_workers_per_execution_caps_worker_participation(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane, worker_count=8, max_local_workers_per_execution=2, max_concurrent_runs=4)
    wide = parse_pipeline(
        {"name": "wide", "steps": [{"name": f"g{i}", "stepKey": "test.gate"} for i in range(10)]}
    )
    try:
        view = await instance.enqueue(request(wide))
        await wait_until(lambda: _true(gate.started == 2))
        assert instance.capacity().active_workers == 2 and instance.capacity().available_workers == 6
        gate.release()
        final = await instance.wait_for_run(view.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED and final.effective_workers == 2
        assert max(gate.max_active.values()) == 2
    finally:
        gate.release()
        await instance.stop()


async def test_a_run_waits_for_a_free_worker_instead_of_failing(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane, worker_count=1, max_local_workers_per_execution=1, max_concurrent_runs=3)
    try:
        first = await instance.enqueue(request(GATED))
        await wait_until(lambda: _true(gate.started == 1))
        second = await instance.enqueue(request(GATED))
        await wait_until(lambda: _running(instance, second.local_run_id))  # it has a run slot
        await wait_until(lambda: _true(instance._permits.contended))  # its step waits for the worker
        assert gate.started == 1 and instance.capacity().active_workers == 1
        gate.release()
        assert (
            await instance.wait_for_run(first.local_run_id, timeout=10)
        ).status is LocalRunStatus.COMPLETED
        assert (
            await instance.wait_for_run(second.local_run_id, timeout=10)
        ).status is LocalRunStatus.COMPLETED
    finally:
        gate.release()
        await instance.stop()


async def test_instance_refuses_a_run_without_a_snapshot(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    try:
        with pytest.raises(MissingSnapshotError):
            await instance.enqueue(LocalRunRequest(pipeline=ONE_STEP, input={}, snapshot=None))
        assert instance.local_runs() == []
    finally:
        await instance.stop()


def attempt(attempt_id: str, shared_run_id: str = "srun_attempt_test") -> LocalRunRequest:
    """One dispatch attempt of a shared run, as the shared-run delivery sends it."""
    return LocalRunRequest(
        pipeline=ONE_STEP,
        input={},
        snapshot=DEFAULT_TENANT,
        shared_run_id=shared_run_id,
        attributes={DISPATCH_ATTEMPT_KEY: attempt_id},
    )


async def test_the_same_dispatch_attempt_twice_returns_the_run_it_already_queued(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    await instance.pause_queue(reason="keep the runs queued")
    try:
        first = await instance.enqueue(attempt("att-1"))
        again = await instance.enqueue(attempt("att-1"))
        other = await instance.enqueue(attempt("att-2"))
        assert again.local_run_id == first.local_run_id and again.status is LocalRunStatus.QUEUED
        assert other.local_run_id != first.local_run_id
        assert sorted(v.local_run_id for v in instance.local_runs()) == sorted(
            [first.local_run_id, other.local_run_id]
        )
        assert instance.capacity().queued == 2
        assert await plane.parts.index.abandon_attempt("srun_attempt_test", "att-1") == first.local_run_id
    finally:
        await instance.stop()


async def test_a_dispatch_attempt_abandoned_before_it_arrived_is_refused(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    index = plane.parts.index
    try:
        assert await index.abandon_attempt("srun_attempt_test", "att-late") == ABANDONED_ATTEMPT
        with pytest.raises(ConflictError, match="already settled"):
            await instance.enqueue(attempt("att-late"))
        assert instance.local_runs() == [] and instance.capacity().queued == 0
        [refused] = await index.list_tenant(DEFAULT_TENANT)
        assert refused.status is LocalRunStatus.CANCELLED and refused.execution_id is None
        assert await index.assigned_to(instance.runtime_instance_id) == []
    finally:
        await instance.stop()


async def test_paused_queue_keeps_runs_queued_without_execution_until_resumed(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    try:
        state = await instance.pause_queue(reason="maintenance window", requested_by="operator")
        view = await instance.enqueue(request())
        assert state.paused and state.reason == "maintenance window"
        assert instance.run_view(view.local_run_id).status is LocalRunStatus.QUEUED
        assert instance.run_view(view.local_run_id).execution_id is None
        assert instance.capacity().can_accept_run is False
        await instance.resume_queue(requested_by="operator")
        final = await instance.wait_for_run(view.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED and final.execution_id
    finally:
        await instance.stop()


async def test_pausing_the_queue_does_not_pause_a_running_execution(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane)
    try:
        running = await instance.enqueue(request(GATED))
        await wait_until(lambda: _true(gate.started == 1))
        await instance.pause_queue(reason="stop new work")
        gate.release()
        final = await instance.wait_for_run(running.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED
    finally:
        gate.release()
        await instance.stop()


async def test_hot_enqueue_while_a_run_executes_starts_after_it(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane, max_concurrent_runs=1)
    try:
        first = await instance.enqueue(request(GATED))
        await wait_until(lambda: _true(gate.started == 1))
        second = await instance.enqueue(request(ONE_STEP))
        assert instance.run_view(second.local_run_id).status is LocalRunStatus.QUEUED
        gate.release()
        assert (
            await instance.wait_for_run(first.local_run_id, timeout=10)
        ).status is LocalRunStatus.COMPLETED
        assert (
            await instance.wait_for_run(second.local_run_id, timeout=10)
        ).status is LocalRunStatus.COMPLETED
    finally:
        gate.release()
        await instance.stop()


async def test_hot_enqueue_while_paused_keeps_both_runs_queued_until_resume(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    try:
        await instance.pause_queue(reason="operator pause", requested_by="admin")
        runs = [await instance.enqueue(request()) for _ in range(2)]
        assert [instance.run_view(r.local_run_id).status for r in runs] == [LocalRunStatus.QUEUED] * 2
        assert [instance.run_view(r.local_run_id).execution_id for r in runs] == [None, None]
        await instance.resume_queue(requested_by="admin")
        finals = [await instance.wait_for_run(r.local_run_id, timeout=10) for r in runs]
        assert [f.status for f in finals] == [LocalRunStatus.COMPLETED] * 2
    finally:
        await instance.stop()


async def test_cancelling_a_queued_run_never_creates_an_execution(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    try:
        await instance.pause_queue()
        view = await instance.enqueue(request())
        cancelled = await instance.cancel_queued_run(view.local_run_id, reason="user cancelled request")
        final = await instance.wait_for_run(view.local_run_id, timeout=5)
        await instance.resume_queue()
        record = await plane.parts.index.get_local(view.local_run_id)
        assert cancelled.status is LocalRunStatus.CANCELLED and final.status is LocalRunStatus.CANCELLED
        assert final.execution_id is None
        assert (
            record is not None and record.status is LocalRunStatus.CANCELLED and record.execution_id is None
        )
        assert not await hot_state.redis.keys(f"{hot_state.prefix}{{exec_*")
    finally:
        await instance.stop()


async def test_cancelling_an_unknown_run_is_a_clear_not_found(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    try:
        with pytest.raises(NotFoundError, match="lrun_unknown"):
            await instance.cancel_run("lrun_unknown")
        with pytest.raises(NotFoundError):
            await instance.cancel_queued_run("lrun_unknown")
        with pytest.raises(NotFoundError):
            await plane.cancel("lrun_unknown", DEFAULT_TENANT)
    finally:
        await instance.stop()


async def test_cancelling_a_running_run_cancels_its_execution_through_execution_control(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    instance = await started(plane)
    try:
        view = await instance.enqueue(request(GATED))
        await wait_until(lambda: _true(gate.started == 1))
        execution_id = instance.run_view(view.local_run_id).execution_id
        assert execution_id
        await instance.cancel_run(view.local_run_id, reason="operator cancellation", requested_by="admin")
        control = await plane.parts.dag_store.read_execution(execution_id)
        assert control is not None and control.control_status in ("Cancelling", "Cancelled")
        gate.release()
        final = await instance.wait_for_run(view.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.CANCELLED and final.execution_id == execution_id
        execution = await plane.parts.dag_store.read_execution(execution_id)
        assert execution is not None and execution.meta.status == "Cancelled"
    finally:
        gate.release()
        await instance.stop()


async def test_cancelling_a_running_shared_run_through_the_control_plane_ends_cancelled(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    await start_instance(plane)
    try:
        submitted = await plane.submit(GATED, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.drain(1, DEFAULT_TENANT)
        await wait_until(lambda: _true(gate.started == 1))
        cancelled = await plane.cancel(
            submitted.shared_run_id, DEFAULT_TENANT, reason="operator cancellation"
        )
        gate.release()

        async def cancelled_in_index() -> bool:
            record = await plane.parts.index.get_by_shared(submitted.shared_run_id)
            return record is not None and record.status is LocalRunStatus.CANCELLED

        await wait_until(cancelled_in_index, timeout=10)
        view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        assert cancelled.execution_id and cancelled.message == "execution cancellation requested"
        assert (view.shared_status, view.local_status, view.execution_status) == (
            "Dispatched",
            "Cancelled",
            "Cancelled",
        )
    finally:
        gate.release()
        await plane.stop()


async def test_a_run_on_another_control_planes_instance_is_cancelled_through_its_execution(
    hot_state: HotState,
) -> None:
    """The in-process instance of control plane A is out of B's reach: B cancels the execution."""
    gate = GateExecutor()
    owner = control_plane(hot_state, gate)
    other = control_plane(hot_state, host="otherhost")
    await start_instance(owner)
    try:
        submitted = await owner.submit(GATED, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await owner.drain(1, DEFAULT_TENANT)
        await wait_until(lambda: _true(gate.started == 1))
        cancelled = await other.cancel(submitted.shared_run_id, DEFAULT_TENANT, reason="from elsewhere")
        gate.release()

        async def cancelled_in_index() -> bool:
            record = await owner.parts.index.get_by_shared(submitted.shared_run_id)
            return record is not None and record.status is LocalRunStatus.CANCELLED

        await wait_until(cancelled_in_index, timeout=10)
        view = await other.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        assert cancelled.execution_id and cancelled.message == "execution cancellation requested"
        assert (view.local_status, view.execution_status) == ("Cancelled", "Cancelled")
    finally:
        gate.release()
        await owner.stop()
        await other.stop()


async def test_failed_execution_outcome_is_readable_through_the_run_index(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane)
    failing = parse_pipeline(
        {
            "name": "fails",
            "steps": [
                {"name": "f", "stepKey": "test.flaky", "config": {"failTimes": 9, "retry": {"maxRetries": 0}}}
            ],
        }
    )
    try:
        view = await instance.enqueue(request(failing))
        final = await instance.wait_for_run(view.local_run_id, timeout=10)
        record = await plane.parts.index.get_local(view.local_run_id)
        assert final.status is LocalRunStatus.FAILED
        assert (
            record is not None
            and record.status is LocalRunStatus.FAILED
            and record.execution_id == final.execution_id
        )
        assert (await plane.run_status(view.local_run_id, DEFAULT_TENANT)).execution_status == "Failed"
    finally:
        await instance.stop()


async def test_instance_whose_heartbeat_lapses_is_no_longer_offered_by_admission(hot_state: HotState) -> None:
    plane = control_plane(hot_state, instance_stale_after_ms=300, scale_out_enabled=False)
    instance = await start_instance(plane)
    await instance.stop(unregister=False)

    async def stale() -> bool:
        [entry] = await plane.parts.registry.entries()
        return not entry.live

    await wait_until(stale, timeout=5)
    decision = await plane.parts.admission.admit(DEFAULT_TENANT)
    assert decision.kind.value == "Reject" and decision.candidates == []


async def test_background_pump_waits_for_ready_capacity_before_dispatching(hot_state: HotState) -> None:
    plane = control_plane(hot_state, background_pump=True)
    await plane.start()
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await wait_until(lambda: _true(plane.parts.gate.checks >= 3))
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert plane.parts.background_pump.gate_passed is False
        assert item is not None and item.attempts == 0
        await start_instance(plane)

        async def dispatched() -> bool:
            run = await plane.parts.runs.get(submitted.shared_run_id)
            return run is not None and run.status is SharedRunStatus.DISPATCHED

        await wait_until(dispatched, timeout=10)
        assert plane.parts.background_pump.gate_passed
    finally:
        await plane.stop()


async def _true(value: bool) -> bool:
    return value


async def test_a_run_waiting_for_human_input_resumes_in_its_instance_after_the_input(
    hot_state: HotState,
) -> None:
    approval = parse_pipeline(
        {
            "name": "approve",
            "steps": [
                {"name": "prep", "stepKey": "test.noop"},
                {
                    "name": "ok",
                    "stepKey": "human.approval",
                    "dependsOn": ["prep"],
                    "config": {"waitingKey": "go"},
                },
            ],
        }
    )
    plane = control_plane(hot_state)
    await start_instance(plane)
    try:
        submitted = await plane.submit(approval, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.drain(1, DEFAULT_TENANT)

        async def waiting() -> bool:
            view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
            return view.control_status == "WaitingForInput"

        await wait_until(waiting, timeout=10)
        view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        assert view.local_status == "Running"  # parked, not failed
        assert view.execution_id is not None
        await plane.parts.canceller.submit_input(view.execution_id, "go", {"approved": True}, DEFAULT_TENANT)

        async def completed() -> bool:
            record = await plane.parts.index.get_by_shared(submitted.shared_run_id)
            return record is not None and record.status is LocalRunStatus.COMPLETED

        await wait_until(completed, timeout=10)
    finally:
        await plane.stop()


async def test_cancelling_a_completed_run_is_a_conflict_and_changes_nothing(hot_state: HotState) -> None:
    plane = control_plane(hot_state)
    await start_instance(plane)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.drain(1, DEFAULT_TENANT)

        async def completed() -> bool:
            record = await plane.parts.index.get_by_shared(submitted.shared_run_id)
            return record is not None and record.status is LocalRunStatus.COMPLETED

        await wait_until(completed, timeout=10)
        with pytest.raises(ConflictError) as refused:
            await plane.cancel(submitted.shared_run_id, DEFAULT_TENANT)
        assert "already Completed" in refused.value.message
        view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        assert (view.local_status, view.execution_status) == ("Completed", "Completed")
    finally:
        await plane.stop()


# Parked runs give their workers back (they keep their run slot)

APPROVAL_ONLY = parse_pipeline(
    {
        "name": "approval",
        "steps": [{"name": "ok", "stepKey": "human.approval", "config": {"waitingKey": "go"}}],
    }
)


def held_until(path: Path, *, after_approval: bool = False) -> PipelineDefinition:
    """A run holding a worker on `test.wait_for_file` until `path` exists (after an approval)."""
    hold: dict[str, object] = {
        "name": "hold",
        "stepKey": "test.wait_for_file",
        "config": {"path": str(path), "maxPollMs": 20},
    }
    if not after_approval:
        return parse_pipeline({"name": "held", "steps": [hold]})
    approve = {"name": "ok", "stepKey": "human.approval", "config": {"waitingKey": "go"}}
    return parse_pipeline({"name": "approve-then-hold", "steps": [approve, {**hold, "dependsOn": ["ok"]}]})


async def _parked(plane: ControlPlane, instance: RuntimeInstance, local_run_id: str) -> bool:
    """The run waits for input (its idle engine workers hold no worker permit)."""
    view = instance.run_view(local_run_id)
    if view.execution_id is None:
        return False
    return await plane.parts.dag_store.control_status(view.execution_id) == "WaitingForInput"


async def _submit_approval(plane: ControlPlane, instance: RuntimeInstance, local_run_id: str) -> None:
    execution_id = instance.run_view(local_run_id).execution_id
    assert execution_id is not None
    await plane.parts.canceller.submit_input(execution_id, "go", {"approved": True}, DEFAULT_TENANT)


async def test_runs_waiting_for_input_give_their_workers_back_so_another_run_completes(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane, worker_count=2, max_local_workers_per_execution=1, max_concurrent_runs=3)
    try:
        parked = [await instance.enqueue(request(APPROVAL_ONLY)) for _ in range(2)]
        for run in parked:
            await wait_until(lambda run=run: _parked(plane, instance, run.local_run_id))
        # The worker that parked a run gives its permit back just after the wait is recorded.
        await wait_until(lambda: _true(instance.capacity().active_workers == 0))
        capacity = instance.capacity()
        assert (capacity.active_workers, capacity.available_workers) == (0, 2)
        assert (capacity.running, capacity.available_run_slots) == (2, 1)  # parked runs keep their slot
        assert capacity.can_accept_run is True

        async def published_free() -> bool:
            [view] = await plane.list_instances(DEFAULT_TENANT)
            return view.available_workers == 2 and view.can_accept_run

        await wait_until(published_free)
        third = await instance.enqueue(request(ONE_STEP))
        done = await instance.wait_for_run(third.local_run_id, timeout=10)
        assert done.status is LocalRunStatus.COMPLETED
        assert [instance.run_view(r.local_run_id).status for r in parked] == [LocalRunStatus.RUNNING] * 2
        for run in parked:
            await _submit_approval(plane, instance, run.local_run_id)
        finals = [await instance.wait_for_run(r.local_run_id, timeout=10) for r in parked]
        assert [f.status for f in finals] == [LocalRunStatus.COMPLETED] * 2
        assert [f.effective_workers for f in finals] == [1, 1]
        assert instance.capacity().active_workers == 0
    finally:
        await instance.stop()
    assert instance.capacity().active_workers == 0


async def test_a_run_cancelled_while_parked_ends_cancelled_without_a_negative_worker_count(
    hot_state: HotState,
) -> None:
    plane = control_plane(hot_state)
    instance = await started(plane, worker_count=2, max_local_workers_per_execution=2)
    try:
        view = await instance.enqueue(request(APPROVAL_ONLY))
        await wait_until(lambda: _parked(plane, instance, view.local_run_id))
        await instance.cancel_run(view.local_run_id, reason="no answer coming")
        final = await instance.wait_for_run(view.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.CANCELLED and final.effective_workers == 2
        capacity = instance.capacity()
        assert (capacity.active_workers, capacity.available_workers, capacity.running) == (0, 2, 0)
    finally:
        await instance.stop()
    assert instance.capacity().active_workers == 0


async def test_a_run_cancelled_while_its_step_waits_for_a_worker_never_runs_the_step(
    hot_state: HotState, tmp_path: Path
) -> None:
    recorder = RecordingExecutor()
    plane = control_plane(hot_state, recorder)
    instance = await started(plane, worker_count=1, max_local_workers_per_execution=1, max_concurrent_runs=2)
    release = tmp_path / "release"
    recorded = parse_pipeline({"name": "recorded", "steps": [{"name": "only", "stepKey": "test.record"}]})
    try:
        holder = await instance.enqueue(request(held_until(release)))
        await wait_until(lambda: _true(instance.capacity().active_workers == 1))
        waiting = await instance.enqueue(request(recorded))
        await wait_until(lambda: _running(instance, waiting.local_run_id))
        await wait_until(lambda: _true(instance._permits.contended))
        await instance.cancel_run(waiting.local_run_id, reason="changed my mind")
        release.touch()
        final = await instance.wait_for_run(waiting.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.CANCELLED
        assert recorder.ran == []  # cancelled before a worker was free: its step never ran
        assert (
            await instance.wait_for_run(holder.local_run_id, timeout=10)
        ).status is LocalRunStatus.COMPLETED
        assert instance.capacity().active_workers == 0
    finally:
        release.touch()
        await instance.stop()


async def test_an_unparked_run_and_a_new_run_share_the_free_worker(
    hot_state: HotState, tmp_path: Path
) -> None:
    """Resumed after input, a run needs no hand-back of workers: it and a run started meanwhile
    both complete on the one worker, and the parked run never kept that worker idle."""
    plane = control_plane(hot_state)
    instance = await started(plane, worker_count=1, max_local_workers_per_execution=1, max_concurrent_runs=3)
    resumed_release = tmp_path / "resumed"
    try:
        resumed = await instance.enqueue(request(held_until(resumed_release, after_approval=True)))
        await wait_until(lambda: _parked(plane, instance, resumed.local_run_id))
        await wait_until(lambda: _true(instance.capacity().active_workers == 0))  # permit given back
        queued = await instance.enqueue(request(ONE_STEP))
        assert (
            await instance.wait_for_run(queued.local_run_id, timeout=10)
        ).status is LocalRunStatus.COMPLETED
        await _submit_approval(plane, instance, resumed.local_run_id)
        await wait_until(lambda: _true(instance.capacity().active_workers == 1))  # holding the file step
        resumed_release.touch()
        final = await instance.wait_for_run(resumed.local_run_id, timeout=10)
        assert final.status is LocalRunStatus.COMPLETED
        assert instance.capacity().active_workers == 0
    finally:
        resumed_release.touch()
        await instance.stop()
