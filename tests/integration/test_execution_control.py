"""Execution control rows of seed 000's scenario table (pause, resume, cancel, human input),
proven against a real redis-server with several workers."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import pytest

from runtime_core.control import ControlAction, ControlStatus
from runtime_core.dag import execution_fingerprint
from runtime_core.errors import ConflictError, NotFoundError
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.pipeline import parse_pipeline
from tests.helpers import wait_until
from tests.integration.control_support import (
    TENANT_A,
    TENANT_B,
    ControlledRuntime,
    HoldExecutor,
    controlled_runtime,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pipelines"

PAUSABLE = parse_pipeline(
    {
        "name": "pausable",
        "steps": [
            {"name": "hold", "stepKey": "test.hold"},
            *[{"name": f"side{i}", "stepKey": "test.hold"} for i in range(3)],
            {"name": "next", "stepKey": "test.hold", "dependsOn": ["hold"]},
            {
                "name": "tail",
                "stepKey": "test.hold",
                "dependsOn": ["next", "side0"],
                "input": {"from": "steps.next.result.data", "state": "state.x"},
            },
        ],
    }
)


async def _paused_mid_run(runtime: ControlledRuntime, holder: HoldExecutor, execution_id: str) -> str:
    """Run with 4 workers, pause while `hold` runs, then let it finish; returns run's status."""
    running = asyncio.create_task(runtime.engine.run(execution_id, workers=4))
    await wait_until(lambda: holder.started("hold"))
    state = await runtime.control.pause(execution_id, TENANT_A)
    assert state.status is ControlStatus.PAUSING  # `hold` is still running
    holder.release("hold")
    return await running


async def test_pause_mid_run_blocks_new_claims_lets_running_steps_finish_and_reaches_paused(
    hot_state: HotState,
) -> None:
    holder = HoldExecutor("hold")
    runtime = controlled_runtime(hot_state, holder)
    execution_id = await runtime.engine.create_execution(PAUSABLE, {"x": 1}, TENANT_A)

    assert await _paused_mid_run(runtime, holder, execution_id) == "Paused"

    view = await runtime.store.read_execution(execution_id)
    assert view is not None
    steps = {step.name: step.status for step in view.steps}
    assert steps["hold"] == "Completed"  # the running step drained
    assert steps["next"] == "Ready" and "next" not in holder.calls  # became ready, never claimed
    state = await runtime.control.get(execution_id, TENANT_A)
    assert (state.status, state.action) == (ControlStatus.PAUSED, ControlAction.NONE)
    control_events = [e.name for e in runtime.observer.events if e.name.startswith("execution.pause")]
    assert control_events == ["execution.pause_requested", "execution.paused"]


async def test_resumed_execution_completes_with_the_fingerprint_of_an_uninterrupted_run(redis_target) -> None:
    execution_id = "exec_pauseresume0001"
    prints = []
    for interrupted in (False, True):
        hot_state = connect_hot_state(redis_target.url, prefix=f"pr{secrets.token_hex(4)}:")
        try:
            holder = HoldExecutor("hold")
            runtime = controlled_runtime(hot_state, holder)
            await runtime.engine.create_execution(PAUSABLE, {"x": 1}, TENANT_A, execution_id=execution_id)
            if interrupted:
                assert await _paused_mid_run(runtime, holder, execution_id) == "Paused"
                resumed = await runtime.control.resume(execution_id, TENANT_A)
                assert resumed.status is ControlStatus.RESUMING
            else:
                holder.release("hold")
            assert await runtime.engine.run(execution_id, workers=4) == "Completed"
            if interrupted:
                state = await runtime.control.get(execution_id, TENANT_A)
                assert state.status is ControlStatus.RUNNING  # Resuming -> Running on advancement
            view = await runtime.store.read_execution(execution_id)
            assert view is not None
            prints.append(execution_fingerprint(view))
        finally:
            await hot_state.close()
    assert prints[0] == prints[1]


PARALLEL = parse_pipeline(
    {"name": "parallel", "steps": [{"name": f"p{i}", "stepKey": "test.hold"} for i in range(3)]}
)


async def test_cancel_racing_natural_completion_always_finalizes_cancelled(hot_state: HotState) -> None:
    for _ in range(50):
        holder = HoldExecutor("p0", "p1", "p2")
        runtime = controlled_runtime(hot_state, holder)
        execution_id = await runtime.engine.create_execution(PARALLEL, {}, TENANT_A)
        running = asyncio.create_task(runtime.engine.run(execution_id, workers=3))
        await wait_until(lambda h=holder: h.started("p0", "p1", "p2"))
        assert (await runtime.control.cancel(execution_id, TENANT_A)).status is ControlStatus.CANCELLING
        holder.release()  # every step now completes: DAG convergence alone would say Completed
        racing_finalizers = [runtime.store.finalize(execution_id) for _ in range(3)]
        status, *_ = await asyncio.gather(running, *racing_finalizers)
        view = await runtime.store.read_execution(execution_id)
        assert view is not None
        assert {step.status for step in view.steps} == {"Completed"}
        assert (status, view.meta.status, view.control_status) == ("Cancelled", "Cancelled", "Cancelled")


async def test_cancel_with_nothing_running_finalizes_cancelled_at_once(hot_state: HotState) -> None:
    runtime = controlled_runtime(hot_state, HoldExecutor())
    execution_id = await runtime.engine.create_execution(PARALLEL, {}, TENANT_A)

    state = await runtime.control.cancel(execution_id, TENANT_A, reason="operator")

    assert (state.status, state.reason) == (ControlStatus.CANCELLED, "operator")
    assert await runtime.store.execution_status(execution_id) == "Cancelled"
    assert await runtime.engine.run(execution_id, workers=2) == "Cancelled"
    assert [e.attributes["status"] for e in runtime.observer.named("execution.finalized")] == ["Cancelled"]


async def test_cancel_of_a_finished_execution_is_a_conflict(hot_state: HotState) -> None:
    runtime = controlled_runtime(hot_state, HoldExecutor())
    execution_id = await runtime.engine.create_execution(PARALLEL, {}, TENANT_A)
    assert await runtime.engine.run(execution_id, workers=2) == "Completed"

    with pytest.raises(ConflictError) as caught:
        await runtime.control.cancel(execution_id, TENANT_A)

    assert "already finished as Completed" in caught.value.message
    assert await runtime.store.execution_status(execution_id) == "Completed"


async def test_human_approval_pipeline_waits_rejects_a_wrong_waiting_key_and_completes_after_the_right_input(
    hot_state: HotState, tmp_path: Path
) -> None:
    runtime = controlled_runtime(hot_state, data_dir=tmp_path)
    pipeline = parse_pipeline((EXAMPLES / "human-approval.json").read_text())
    execution_id = await runtime.engine.create_execution(
        pipeline, {"candidateId": "c-1", "jobId": "j-1"}, TENANT_A
    )

    assert await runtime.engine.run(execution_id, workers=3) == "WaitingForInput"
    waiting = await runtime.control.get(execution_id, TENANT_A)
    assert (waiting.status, waiting.waiting_key, waiting.waiting_step) == (
        ControlStatus.WAITING_FOR_INPUT,
        "hire-approval",
        "approval",
    )

    with pytest.raises(ConflictError) as wrong:
        await runtime.control.submit_input(execution_id, "other-key", {"approved": False}, TENANT_A)
    assert "waiting for input under key 'hire-approval'" in wrong.value.message
    assert await runtime.control.get(execution_id, TENANT_A) == waiting
    assert await hot_state.redis.hgetall(runtime.store.keys(execution_id).human_input) == {}

    answer = {"approved": True, "comment": "Approved by operator"}
    submitted = await runtime.control.submit_input(execution_id, "hire-approval", answer, TENANT_A)
    assert submitted.status is ControlStatus.RESUMING
    assert await runtime.engine.run(execution_id, workers=3) == "Completed"

    view = await runtime.store.read_execution(execution_id)
    assert view is not None
    approval = next(step for step in view.steps if step.name == "approval")
    assert approval.result["data"] == {"approved": True, "input": answer}
    [event] = runtime.observer.named("execution.input_submitted")
    assert (event.step_name, event.attributes["waiting_key"], event.attributes["input"]) == (
        "approval",
        "hire-approval",
        answer,
    )
    stored = await hot_state.redis.hget(runtime.store.keys(execution_id).human_input, "approval")
    assert json.loads(stored) == answer


async def test_foreign_tenant_gets_the_unknown_id_not_found_from_every_control_method(
    hot_state: HotState,
) -> None:
    runtime = controlled_runtime(hot_state, HoldExecutor())
    execution_id = await runtime.engine.create_execution(PARALLEL, {}, TENANT_A)
    control = runtime.control
    calls = {
        "get": lambda eid, who: control.get(eid, who),
        "pause": lambda eid, who: control.pause(eid, who),
        "resume": lambda eid, who: control.resume(eid, who),
        "cancel": lambda eid, who: control.cancel(eid, who),
        "wait_for_input": lambda eid, who: control.wait_for_input(eid, "p0", "key", who),
        "submit_input": lambda eid, who: control.submit_input(eid, "key", {"ok": True}, who),
    }
    for name, call in calls.items():
        with pytest.raises(NotFoundError) as foreign:
            await call(execution_id, TENANT_B)
        with pytest.raises(NotFoundError) as unknown:
            await call("exec_doesnotexist", TENANT_B)
        expected = str(unknown.value).replace("exec_doesnotexist", execution_id)
        assert str(foreign.value) == expected, name
    state = await control.get(execution_id, TENANT_A)
    assert (state.status, state.version) == (ControlStatus.NONE, 0)


async def test_resume_while_running_is_a_conflict_and_leaves_the_state_unchanged(hot_state: HotState) -> None:
    holder = HoldExecutor("first", "second")
    runtime = controlled_runtime(hot_state, holder)
    pipeline = parse_pipeline(
        {
            "name": "two",
            "steps": [
                {"name": "first", "stepKey": "test.hold"},
                {"name": "second", "stepKey": "test.hold", "dependsOn": ["first"]},
            ],
        }
    )
    execution_id = await runtime.engine.create_execution(pipeline, {}, TENANT_A)
    running = asyncio.create_task(runtime.engine.run(execution_id, workers=2))
    await wait_until(lambda: holder.started("first"))
    await runtime.control.pause(execution_id, TENANT_A)
    await runtime.control.resume(execution_id, TENANT_A)
    holder.release("first")
    await wait_until(lambda: holder.started("second"))

    async def settled_running() -> bool:
        return (await runtime.control.get(execution_id, TENANT_A)).status is ControlStatus.RUNNING

    await wait_until(settled_running)
    before = await runtime.control.get(execution_id, TENANT_A)

    with pytest.raises(ConflictError) as caught:
        await runtime.control.resume(execution_id, TENANT_A)

    assert "its control status is Running" in caught.value.message
    assert caught.value.hint is not None and "pause or cancel" in caught.value.hint
    assert await runtime.control.get(execution_id, TENANT_A) == before
    holder.release("second")
    assert await running == "Completed"


async def test_stale_expected_version_is_a_conflict_and_changes_nothing(hot_state: HotState) -> None:
    runtime = controlled_runtime(hot_state, HoldExecutor())
    execution_id = await runtime.engine.create_execution(PARALLEL, {}, TENANT_A)
    paused = await runtime.control.pause(execution_id, TENANT_A)
    assert (paused.status, paused.version) == (ControlStatus.PAUSED, 1)

    with pytest.raises(ConflictError) as caught:
        await runtime.control.resume(execution_id, TENANT_A, expected_version=0)

    assert "now version 1" in caught.value.message
    assert await runtime.control.get(execution_id, TENANT_A) == paused
