"""Side effects that survive uncertainty (issue 31.3), in-process: a `tool.http` step whose
worker is cut off in the middle of its request (its task cancelled, its claim left Running,
then released the way recovery releases a dead instance's claims) is resumed by another
engine run; the step's operation id (recorded before the request, sent as Idempotency-Key)
is found uncertain and its declared policy settles it: retry with the same id, reconcile
through the status endpoint, fail, or ask a human. The peer is a real loopback HTTP server
counting its side effects. (The SIGKILL of a real runtime-instance process is
tests/integration/test_mcp_tool_crash.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime_core.control import ExecutionControlService
from runtime_core.dag import DagEngine
from runtime_core.hot_state import HotState
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.recovery import release_execution_claims
from tests.integration.control_plane_support import TENANT_A, make_engine
from tests.integration.control_support import RecordingObserver, controlled_runtime
from tests.loopback import serving
from tests.side_effect_peer import SideEffectPeer


@pytest.fixture
async def peer() -> AsyncIterator[tuple[SideEffectPeer, str]]:
    side_effects = SideEffectPeer()
    async with serving(side_effects.app()) as base_url:
        yield side_effects, base_url
        side_effects.release()


def call_pipeline(url: str, **config: Any) -> PipelineDefinition:
    step = {"name": "call", "stepKey": "tool.http", "input": {"order": "state.order"}}
    step["config"] = {"method": "POST", "url": url, **config}
    return parse_pipeline({"name": "side-effect", "steps": [step]})


async def cut_off_during_call(engine: DagEngine, peer: SideEffectPeer, pipeline: PipelineDefinition) -> str:
    """The execution's only step sent its request and its worker died waiting for the answer."""
    peer.hold = True
    execution_id = await engine.create_execution(pipeline, {"order": "o-1"}, TENANT_A)
    run = asyncio.create_task(engine.run(execution_id, workers=1))
    await asyncio.wait_for(peer.held.wait(), timeout=10)
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    peer.hold = False
    now = await engine.store.hot_state.server_time_ms()
    assert await release_execution_claims(engine.store, execution_id, claimed_before_ms=now) == ["call"]
    return execution_id


def engine_recording(hot_state: HotState) -> tuple[DagEngine, ExecutionControlService, RecordingObserver]:
    runtime = controlled_runtime(hot_state, lease_ms=30_000)
    return runtime.engine, runtime.control, runtime.observer


def reconcile_pipeline(base_url: str) -> PipelineDefinition:
    """A POST whose uncertainty is settled through the peer's status endpoint."""
    return call_pipeline(
        f"{base_url}/effects", onUncertain="reconcile", statusUrl=f"{base_url}/effects/{{operationId}}"
    )


async def test_the_operation_id_is_recorded_before_the_request_and_sent_as_idempotency_key(
    hot_state: HotState, peer: tuple[SideEffectPeer, str]
) -> None:
    side_effects, base_url = peer
    engine, _, recorded = engine_recording(hot_state)
    pipeline = call_pipeline(f"{base_url}/effects")
    execution_id = await engine.create_execution(pipeline, {"order": "o-1"}, TENANT_A)

    assert await engine.run(execution_id, workers=1) == "Completed"

    [started] = recorded.attributes("step.operation_started")
    [key] = side_effects.calls
    assert key == started["operation_id"] and key.startswith("op_")
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    assert view.steps[0].result["operationId"] == key
    assert side_effects.effects == {key: 1}


async def test_retry_policy_calls_an_idempotent_peer_again_with_the_same_operation_id(
    hot_state: HotState, peer: tuple[SideEffectPeer, str]
) -> None:
    side_effects, base_url = peer
    engine, _, recorded = engine_recording(hot_state)
    pipeline = call_pipeline(f"{base_url}/effects/idempotent", onUncertain="retry")
    execution_id = await cut_off_during_call(engine, side_effects, pipeline)

    assert await engine.run(execution_id, workers=1) == "Completed"

    [key] = side_effects.calls
    assert side_effects.calls[key] == 2 and side_effects.effects[key] == 1
    [uncertain] = recorded.attributes("step.operation_uncertain")
    [settled] = recorded.attributes("step.operation_settled")
    assert (uncertain["operation_id"], uncertain["policy"]) == (key, "retry")
    assert (settled["operation_id"], settled["settled_by"]) == (key, "retried")
    view = await engine.store.read_execution(execution_id)
    assert view is not None and view.steps[0].result["data"]["effect"] == 1


async def test_a_post_without_a_declared_policy_fails_uncertain_and_is_never_called_twice(
    hot_state: HotState, peer: tuple[SideEffectPeer, str]
) -> None:
    side_effects, base_url = peer
    engine, _, recorded = engine_recording(hot_state)
    pipeline = call_pipeline(f"{base_url}/effects", retry={"maxRetries": 3})
    execution_id = await cut_off_during_call(engine, side_effects, pipeline)

    assert await engine.run(execution_id, workers=1) == "Failed"

    assert list(side_effects.calls.values()) == [1]
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    error = view.steps[0].last_error
    assert error is not None and error.code == "uncertain" and "not called again" in error.message
    assert [s["settled_by"] for s in recorded.attributes("step.operation_settled")] == ["failed"]
    assert recorded.attributes("step.operation_uncertain")[0]["policy"] == "fail"


async def test_reconcile_takes_the_outcome_the_status_endpoint_reports_without_calling_again(
    hot_state: HotState, peer: tuple[SideEffectPeer, str]
) -> None:
    side_effects, base_url = peer
    engine, _, recorded = engine_recording(hot_state)
    execution_id = await cut_off_during_call(engine, side_effects, reconcile_pipeline(base_url))

    assert await engine.run(execution_id, workers=1) == "Completed"

    [key] = side_effects.calls
    assert side_effects.calls[key] == 1 and side_effects.effects[key] == 1
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    assert view.steps[0].result["reconciled"] is True and view.steps[0].result["data"]["key"] == key
    assert [s["settled_by"] for s in recorded.attributes("step.operation_settled")] == ["reconciled_found"]


async def test_reconcile_calls_again_when_the_peer_never_saw_the_operation(
    hot_state: HotState, peer: tuple[SideEffectPeer, str]
) -> None:
    side_effects, base_url = peer
    engine, _, recorded = engine_recording(hot_state)
    execution_id = await cut_off_during_call(engine, side_effects, reconcile_pipeline(base_url))
    [key] = side_effects.calls
    side_effects.results.clear()  # the peer lost it: as if the request never arrived
    side_effects.effects.clear()

    assert await engine.run(execution_id, workers=1) == "Completed"

    assert side_effects.calls[key] == 2 and side_effects.effects == {key: 1}
    settled = recorded.attributes("step.operation_settled")
    assert [s["settled_by"] for s in settled] == ["reconciled_not_found"]


async def test_ask_parks_the_step_until_a_human_decides_and_uses_the_result_they_give(
    hot_state: HotState, peer: tuple[SideEffectPeer, str]
) -> None:
    side_effects, base_url = peer
    engine, control, recorded = engine_recording(hot_state)
    execution_id = await cut_off_during_call(
        engine, side_effects, call_pipeline(f"{base_url}/effects", onUncertain="ask")
    )

    assert await engine.run(execution_id, workers=1) == "WaitingForInput"
    state = await control.get(execution_id, TENANT_A)
    assert (state.waiting_key, state.waiting_step) == ("call.uncertain", "call")
    answer = {"decision": "done", "result": {"ticket": "T-1"}, "comment": "seen in the peer's console"}
    await control.submit_input(execution_id, "call.uncertain", answer, TENANT_A)
    assert await engine.run(execution_id, workers=1) == "Completed"

    assert list(side_effects.calls.values()) == [1]
    view = await engine.store.read_execution(execution_id)
    assert view is not None and view.steps[0].result["data"] == {"ticket": "T-1"}
    assert [s["settled_by"] for s in recorded.attributes("step.operation_settled")] == ["human_done"]
    assert await hot_state.redis.hget(engine.store.keys(execution_id).human_input, "call") is None


async def test_a_human_retry_calls_again_with_the_same_operation_id(
    hot_state: HotState, peer: tuple[SideEffectPeer, str]
) -> None:
    side_effects, base_url = peer
    engine, control = make_engine(hot_state)
    execution_id = await cut_off_during_call(
        engine, side_effects, call_pipeline(f"{base_url}/effects/idempotent", onUncertain="ask")
    )
    assert await engine.run(execution_id, workers=1) == "WaitingForInput"
    await control.submit_input(execution_id, "call.uncertain", {"decision": "retry"}, TENANT_A)

    assert await engine.run(execution_id, workers=1) == "Completed"

    [key] = side_effects.calls
    assert side_effects.calls[key] == 2 and side_effects.effects[key] == 1
