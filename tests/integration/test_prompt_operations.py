"""An `ai.prompt` model call is a guarded operation (issue 31.3): its operation id is recorded before
the request, so a worker cut off while the model holds its reply (its task cancelled, its claim
released the way recovery releases a dead instance's claims) leaves the call uncertain; the
next engine run records `step.operation_uncertain` and settles it by the step's `onUncertain`
(default `retry`: the model is asked again, its reply kept once; `fail`: never asked again).
The model is the loopback LLM server of examples/agents (OpenAI wire format), counting each
reply that went out whole.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime_core.dag import DagEngine
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import HotState
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.recovery import release_execution_claims
from runtime_core.steps import AiPromptExecutor, StepProviders, StepProviderSettings
from tests.agent_support import API_KEY, KEY_ENV, LoopbackLlm, llm_settings, served_model
from tests.helpers import wait_until
from tests.integration.control_plane_support import TENANT_A
from tests.integration.control_support import RecordingObserver, controlled_runtime

REPLY = "The deploy slipped a day."


@pytest.fixture
async def model(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[LoopbackLlm, AiPromptExecutor]]:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    async with served_model([{"text": REPLY}]) as (llm, url):
        providers = StepProviders.build(StepProviderSettings.model_validate({"llm": llm_settings(url)}))
        yield llm, AiPromptExecutor(providers.llm)
        llm.release(0)


def prompt_pipeline(**config: Any) -> PipelineDefinition:
    step = {
        "name": "ask",
        "stepKey": "ai.prompt",
        "input": {"note": "state.note"},
        "config": {"template": "Summarize: {note}", "provider": "gpt", **config},
    }
    return parse_pipeline({"name": "prompt-operation", "steps": [step]})


async def cut_off_during_call(engine: DagEngine, llm: LoopbackLlm, pipeline: PipelineDefinition) -> str:
    """The execution's only step sent its request and its worker died waiting for the reply."""
    llm.hold(0)
    execution_id = await engine.create_execution(pipeline, {"note": "the deploy"}, TENANT_A)
    run = asyncio.create_task(engine.run(execution_id, workers=1))

    async def held() -> bool:
        return 0 in llm.waiting

    await wait_until(held, timeout=10)
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    llm.release(0)
    now = await engine.store.hot_state.server_time_ms()
    assert await release_execution_claims(engine.store, execution_id, claimed_before_ms=now) == ["ask"]
    return execution_id


def engine_with(hot_state: HotState, executor: AiPromptExecutor) -> tuple[DagEngine, RecordingObserver]:
    runtime = controlled_runtime(hot_state, executor, lease_ms=30_000)
    return runtime.engine, runtime.observer


async def test_a_model_call_cut_off_is_uncertain_and_retried_by_default_its_reply_kept_once(
    hot_state: HotState, model: tuple[LoopbackLlm, AiPromptExecutor]
) -> None:
    llm, executor = model
    engine, recorded = engine_with(hot_state, executor)
    execution_id = await cut_off_during_call(engine, llm, prompt_pipeline())
    [started] = recorded.attributes("step.operation_started")  # before the request went out
    assert started["operation_id"].startswith("op_")

    assert await engine.run(execution_id, workers=1) == "Completed"

    view = await engine.store.read_execution(execution_id)
    assert view is not None and view.steps[0].result["data"]["text"] == REPLY
    [uncertain] = recorded.attributes("step.operation_uncertain")
    [settled] = recorded.attributes("step.operation_settled")
    assert (uncertain["operation_id"], uncertain["policy"]) == (started["operation_id"], "retry")
    assert (settled["operation_id"], settled["settled_by"]) == (started["operation_id"], "retried")
    assert len(llm.requests) == 2 and list(llm.completed.values()) == [1]


async def test_a_model_call_cut_off_under_fail_fails_uncertain_and_is_never_asked_again(
    hot_state: HotState, model: tuple[LoopbackLlm, AiPromptExecutor]
) -> None:
    llm, executor = model
    engine, recorded = engine_with(hot_state, executor)
    pipeline = prompt_pipeline(onUncertain="fail", retry={"maxRetries": 3})
    execution_id = await cut_off_during_call(engine, llm, pipeline)

    assert await engine.run(execution_id, workers=1) == "Failed"

    assert len(llm.requests) == 1 and not llm.completed
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    error = view.steps[0].last_error
    assert error is not None and error.code == "uncertain" and "not called again" in error.message
    assert [s["settled_by"] for s in recorded.attributes("step.operation_settled")] == ["failed"]


async def test_a_model_call_cannot_declare_reconcile_at_submit(
    hot_state: HotState, model: tuple[LoopbackLlm, AiPromptExecutor]
) -> None:
    _, executor = model
    engine, _ = engine_with(hot_state, executor)
    with pytest.raises(InvalidPipelineError) as refused:
        engine.validate(prompt_pipeline(onUncertain="reconcile"))
    assert "onUncertain" in refused.value.message and "cannot be reconciled" in refused.value.message
