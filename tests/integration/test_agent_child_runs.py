"""A pipeline as an agent's tool: the call runs a child run through the shared queue (real Redis, a
control plane with its runtime instance and pump), the agent reads the child's result, and the
two are linked both ways: the parent's transcript and ledger name the child, the child's
ledger (its `shared_run.submitted` entry) names the parent, and so does its `run.status`, before
and after the child is archived."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator

import pytest

from runtime_core.agents import read_sub_steps
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import ArchiveOutcome
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from tests.agent_support import API_KEY, KEY_ENV, LoopbackLlm, served_model, write_providers
from tests.helpers import wait_until

TENANT = ExecutionContextSnapshot(user_id="u-child", tenant_id="tenant-children", context_key="child-tests")
SUMMARY = {
    "name": "summarize",
    "steps": [
        {
            "name": "sum",
            "stepKey": "ai.prompt",
            "input": {"note": "state.note"},
            "config": {"template": "{note}"},
        }
    ],
}


@pytest.fixture
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RuntimeServices, LoopbackLlm]]:
    script = [
        {"tool_calls": [{"name": "summarize", "arguments": {"note": "the deploy slipped a day"}}]},
        {"text": "Summarized."},
    ]
    folder = tmp_path_factory.mktemp("agent-children")
    async with served_model(script) as (llm, url):
        providers = write_providers(folder, url)
        settings = RuntimeSettings(
            data_dir=folder / "data",
            redis_url=redis_server.url,
            redis_prefix=f"child{secrets.token_hex(4)}:",
            providers_file=providers,
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(KEY_ENV, API_KEY)
            async with RuntimeServices(settings) as started:
                yield started, llm


async def test_a_pipeline_tool_runs_a_child_run_linked_both_ways_and_the_model_reads_its_result(
    services: tuple[RuntimeServices, LoopbackLlm],
) -> None:
    runtime, llm = services
    tool = {
        "name": "summarize",
        "pipeline": SUMMARY,
        "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}},
    }
    agent = {"prompt": "Summarize the note", "provider": "gpt", "tools": [tool]}
    pipeline = parse_pipeline(
        {"name": "parent", "steps": [{"name": "agent", "stepKey": "ai.agent", "config": agent}]}
    )
    plane = runtime.control_plane
    parent = await plane.submit(pipeline, {}, SubmitMode.QUEUE_FIRST, TENANT)

    async def done() -> bool:
        view = await plane.run_status(parent.shared_run_id, TENANT)
        return view.execution_status in ("Completed", "Failed")

    await wait_until(done, timeout=60, interval=0.05)
    view = await plane.run_status(parent.shared_run_id, TENANT)
    assert view.execution_status == "Completed", view.failure_reason
    assert view.execution_id is not None
    [_, call, _] = await read_sub_steps(runtime.dag_store, view.execution_id, "agent")
    child_id = call.output["childRun"]["sharedRunId"]
    child_data = json.loads(call.output["text"])  # the child's sink data, as the model read it
    assert child_data["prompt"] == "the deploy slipped a day" and child_data["text"].startswith(
        "[template-v1 "
    )
    assert llm.requests[-1]["messages"][-1]["content"] == call.output["text"]  # what the model read
    child = await plane.run_status(child_id, TENANT)
    assert (
        child.execution_status == "Completed" and child.execution_id == call.output["childRun"]["executionId"]
    )
    assert child.parent_call == f"{view.execution_id}:agent:1"  # the agent's call: sub-step 1

    await runtime.audit.flush()
    parent_ledger = await runtime.audit.queries.ledger(TENANT, execution_id=view.execution_id)
    [started] = [e for e in parent_ledger if e.event == "agent.child_run_started"]
    assert started.attributes["child_shared_run_id"] == child_id
    child_ledger = await runtime.audit.queries.ledger(TENANT, shared_run_id=child_id)
    [submitted] = [e for e in child_ledger if e.event == "shared_run.submitted"]
    assert submitted.attributes["parent.execution.id"] == view.execution_id
    assert submitted.attributes["parent.step"] == "agent"

    assert child.local_run_id is not None
    archiver = plane.parts.lifecycle.archiver
    assert await archiver.archive_local_end(child.local_run_id) is ArchiveOutcome.ARCHIVED
    archived = await plane.run_status(child_id, TENANT)  # from its durable run record now
    assert archived.execution_status == "Completed" and archived.parent_call == child.parent_call
