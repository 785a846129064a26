"""A pipeline as an agent's tool: the call runs a child run submitted through the runtime's submit path
(real Redis, a control plane with its runtime instance and pump), the agent reads the child's
result, and the two are linked both ways: the parent's transcript and ledger name the child, the
child's ledger (its `shared_run.submitted` entry) names the parent, and so does its
`run.status`, before and after the child is archived. Being an ordinary submit, the child gets
its pipeline's concurrency key and rate limits and a durable copy of its request; the agent
learns of its end from its run event (the safety re-read is set to an hour here)."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime_core.agents import HotStateChildCanceller, _children, inline_catalog_pipelines, read_sub_steps
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import RunStatusView, run_final_status, run_is_done
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import ArchiveOutcome
from runtime_core.pipeline import PipelineCatalog, PipelineDefinition, parse_pipeline
from runtime_core.queueing import SubmitMode, SubmitResult
from runtime_core.steps import STEP_CONFIG_RULE
from tests.agent_support import API_KEY, KEY_ENV, LoopbackLlm, served_model, write_providers
from tests.helpers import wait_until

TENANT = ExecutionContextSnapshot(user_id="u-child", tenant_id="tenant-children", context_key="child-tests")


def summary_pipeline(**flow: Any) -> dict[str, Any]:
    return {
        "name": "summarize",
        "config": {"flow": flow},
        "steps": [
            {
                "name": "sum",
                "stepKey": "ai.prompt",
                "input": {"note": "state.note"},
                "config": {"template": "{note}"},
            }
        ],
    }


def summarize(note: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "summarize", "arguments": {"note": note}}]}


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RuntimeServices, LoopbackLlm]]:
    folder = tmp_path_factory.mktemp("agent-children")
    async with served_model([]) as (llm, url):
        providers = write_providers(folder, url)
        settings = RuntimeSettings(
            data_dir=folder / "data",
            redis_url=redis_server.url,
            redis_prefix=f"child{secrets.token_hex(4)}:",
            providers_file=providers,
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(KEY_ENV, API_KEY)
            patch.setattr(_children, "SAFETY_READ_S", 3600.0)  # only the child's run event wakes the agent
            async with RuntimeServices(settings) as started:
                yield started, llm


def agent_pipeline(tool_pipeline: dict[str, Any] | str) -> PipelineDefinition:
    tool = {
        "name": "summarize",
        "pipeline": tool_pipeline,
        "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}},
    }
    agent = {"prompt": f"Summarize the notes ({secrets.token_hex(4)})", "provider": "gpt", "tools": [tool]}
    return parse_pipeline(
        {"name": "parent", "steps": [{"name": "agent", "stepKey": "ai.agent", "config": agent}]}
    )


async def submit_agent(runtime: RuntimeServices, tool_pipeline: dict[str, Any]) -> SubmitResult:
    return await runtime.control_plane.submit(
        agent_pipeline(tool_pipeline), {}, SubmitMode.QUEUE_FIRST, TENANT
    )


async def ended(runtime: RuntimeServices, shared_run_id: str) -> RunStatusView:
    async def done() -> bool:
        view = await runtime.control_plane.run_status(shared_run_id, TENANT)
        return view.execution_status in ("Completed", "Failed")

    await wait_until(done, timeout=60, interval=0.05)
    return await runtime.control_plane.run_status(shared_run_id, TENANT)


async def ledger(runtime: RuntimeServices, **ids: str) -> list[Any]:
    await runtime.audit.flush()
    return list(await runtime.audit.queries.ledger(TENANT, **ids))


async def test_a_pipeline_tool_runs_a_child_run_linked_both_ways_and_the_model_reads_its_result(
    services: tuple[RuntimeServices, LoopbackLlm],
) -> None:
    runtime, llm = services
    llm.script = [summarize("the deploy slipped a day"), {"text": "Summarized."}]
    plane = runtime.control_plane
    keyed = summary_pipeline(concurrency={"key": "input.note", "limit": 1})
    parent = await submit_agent(runtime, keyed)
    view = await ended(runtime, parent.shared_run_id)
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

    # An ordinary submit: its pipeline's concurrency key, a durable copy of its request.
    record = await plane.parts.runs.get(child_id)
    assert record is not None and record.concurrency_key == "input.note=the deploy slipped a day"
    copies = await runtime.durable_store.list_submitted_runs()
    assert child_id in {copy.shared_run_id for copy in copies}

    [started] = [
        e
        for e in await ledger(runtime, execution_id=view.execution_id)
        if e.event == "agent.child_run_started"
    ]
    assert started.attributes["child_shared_run_id"] == child_id
    [submitted] = [
        e for e in await ledger(runtime, shared_run_id=child_id) if e.event == "shared_run.submitted"
    ]
    assert submitted.attributes["parent.execution.id"] == view.execution_id
    assert submitted.attributes["parent.step"] == "agent"

    assert child.local_run_id is not None
    archiver = plane.parts.lifecycle.archiver
    assert await archiver.archive_local_end(child.local_run_id) is ArchiveOutcome.ARCHIVED
    archived = await plane.run_status(child_id, TENANT)  # from its durable run record now
    assert archived.execution_status == "Completed" and archived.parent_call == child.parent_call


async def test_a_child_run_is_paced_by_its_pipelines_submit_rate_limit(
    services: tuple[RuntimeServices, LoopbackLlm],
) -> None:
    runtime, llm = services
    llm.script = [summarize("first"), summarize("second"), {"text": "Both summarized."}]
    limited = summary_pipeline(rateLimits=[{"name": "children", "limit": 1, "period": "1h"}])
    parent = await submit_agent(runtime, limited)
    plane = runtime.control_plane

    async def paced() -> bool:
        view = await plane.run_status(parent.shared_run_id, TENANT)
        if view.execution_id is None:
            return False
        events = await ledger(runtime, execution_id=view.execution_id)
        return any(e.event == "agent.child_run_rate_limited" for e in events)

    await wait_until(paced, timeout=60, interval=0.1)
    view = await plane.run_status(parent.shared_run_id, TENANT)
    assert view.execution_id is not None
    events = await ledger(runtime, execution_id=view.execution_id)
    [limit] = [e for e in events if e.event == "agent.child_run_rate_limited"][:1]
    assert limit.attributes["tool"] == "summarize" and "'children'" in limit.attributes["limit"]
    assert len([e for e in events if e.event == "agent.child_run_started"]) == 1  # the second waits
    await plane.cancel(parent.shared_run_id, TENANT)


async def test_a_tool_naming_a_catalog_pipeline_runs_its_definition_and_an_unresolved_name_is_refused(
    services: tuple[RuntimeServices, LoopbackLlm],
) -> None:
    runtime, llm = services
    llm.script = [summarize("from the catalog"), {"text": "Summarized."}]
    named = agent_pipeline("summarize")
    with pytest.raises(InvalidPipelineError) as unresolved:  # a submit path without the catalog
        await runtime.control_plane.submit(named, {}, SubmitMode.QUEUE_FIRST, TENANT)
    assert unresolved.value.rule == STEP_CONFIG_RULE
    assert "tool 'summarize' names catalog pipeline 'summarize'" in unresolved.value.message

    catalog = PipelineCatalog({"summarize": parse_pipeline(summary_pipeline())})
    resolved = inline_catalog_pipelines(named, catalog.get)  # what the MCP `submit` does
    parent = await runtime.control_plane.submit(resolved, {}, SubmitMode.QUEUE_FIRST, TENANT)
    view = await ended(runtime, parent.shared_run_id)
    assert view.execution_status == "Completed", view.failure_reason
    assert view.execution_id is not None
    [_, call, _] = await read_sub_steps(runtime.dag_store, view.execution_id, "agent")
    assert json.loads(call.output["text"])["prompt"] == "from the catalog"


# Cancelling the agent's run cancels its child (the parent-close policy: cancel)


def held_child(gate: Path, **flow: Any) -> dict[str, Any]:
    """A child pipeline whose one step runs until `gate` exists (keyed by its note with `flow`)."""
    step = {"name": "hold", "stepKey": "test.wait_for_file", "config": {"path": str(gate)}}
    return {"name": "held-child", "config": {"flow": flow}, "steps": [step]}


async def until_done(runtime: RuntimeServices, shared_run_id: str) -> RunStatusView:
    async def done() -> bool:
        return run_is_done(await runtime.control_plane.run_status(shared_run_id, TENANT))

    await wait_until(done, timeout=60, interval=0.05)
    return await runtime.control_plane.run_status(shared_run_id, TENANT)


async def started_child(runtime: RuntimeServices, parent: SubmitResult) -> tuple[str, str]:
    """The parent's ExecutionId and its child's SharedRunId, once the agent started the child."""
    found: list[tuple[str, str]] = []

    async def started() -> bool:
        view = await runtime.control_plane.run_status(parent.shared_run_id, TENANT)
        if view.execution_id is None:
            return False
        events = await ledger(runtime, execution_id=view.execution_id)
        found[:] = [
            (view.execution_id, e.attributes["child_shared_run_id"])
            for e in events
            if e.event == "agent.child_run_started"
        ]
        return bool(found)

    await wait_until(started, timeout=60, interval=0.05)
    return found[0]


async def test_cancelling_an_agents_run_cancels_its_running_child_and_the_agent_asks_the_model_no_more(
    services: tuple[RuntimeServices, LoopbackLlm], tmp_path: Path
) -> None:
    runtime, llm = services
    gate = tmp_path / "gate"
    llm.script = [summarize("a long job"), {"text": "never asked"}]
    plane = runtime.control_plane
    parent = await submit_agent(runtime, held_child(gate))
    execution_id, child_id = await started_child(runtime, parent)

    async def child_running() -> bool:
        return (await plane.run_status(child_id, TENANT)).execution_status == "Running"

    await wait_until(child_running, timeout=30, interval=0.05)
    asked = len(llm.requests)
    await plane.cancel(parent.shared_run_id, TENANT)

    async def child_cancelling() -> bool:
        return (await plane.run_status(child_id, TENANT)).control_status == "Cancelling"

    await wait_until(child_cancelling, timeout=30, interval=0.05)  # woken by the parent's cancel event
    assert not run_is_done(await plane.run_status(parent.shared_run_id, TENANT))
    gate.touch()  # the child's claimed step finishes; nothing new starts in either run
    assert run_final_status(await until_done(runtime, child_id)) == "Cancelled"
    assert run_final_status(await until_done(runtime, parent.shared_run_id)) == "Cancelled"
    assert len(llm.requests) == asked  # no model turn after the cancel
    [cancelled] = [
        e for e in await ledger(runtime, execution_id=execution_id) if e.event == "agent.child_run_cancelled"
    ]
    assert cancelled.attributes["child_shared_run_id"] == child_id


async def test_cancelling_an_agents_run_cancels_its_child_still_queued_without_waiting_for_anything(
    services: tuple[RuntimeServices, LoopbackLlm], tmp_path: Path
) -> None:
    runtime, llm = services
    gate = tmp_path / "gate"
    keyed = held_child(gate, concurrency={"key": "input.note", "limit": 1})
    plane = runtime.control_plane
    blocker = await plane.submit(parse_pipeline(keyed), {"note": "busy"}, SubmitMode.QUEUE_FIRST, TENANT)
    llm.script = [summarize("busy"), {"text": "never asked"}]  # its child waits for the blocker's key
    parent = await submit_agent(runtime, keyed)
    try:
        _, child_id = await started_child(runtime, parent)
        await plane.cancel(parent.shared_run_id, TENANT)
        child = await until_done(runtime, child_id)
        assert child.shared_status == "Cancelled" and child.execution_id is None  # it never started
        assert run_final_status(await until_done(runtime, parent.shared_run_id)) == "Cancelled"
        assert not run_is_done(await plane.run_status(blocker.shared_run_id, TENANT))
    finally:
        gate.touch()
    assert run_final_status(await until_done(runtime, blocker.shared_run_id)) == "Completed"


async def test_a_process_without_a_control_plane_cancels_a_child_in_the_queue_or_through_its_execution(
    services: tuple[RuntimeServices, LoopbackLlm], tmp_path: Path
) -> None:
    runtime, _ = services
    gate = tmp_path / "gate"
    keyed = parse_pipeline(held_child(gate, concurrency={"key": "input.note", "limit": 1}))
    plane = runtime.control_plane
    canceller = HotStateChildCanceller(plane.parts.controller, plane.parts.index, runtime.control)
    running = await plane.submit(keyed, {"note": "hot"}, SubmitMode.QUEUE_FIRST, TENANT)
    queued = await plane.submit(keyed, {"note": "hot"}, SubmitMode.QUEUE_FIRST, TENANT)
    try:

        async def started() -> bool:
            return (await plane.run_status(running.shared_run_id, TENANT)).execution_status == "Running"

        await wait_until(started, timeout=30, interval=0.05)
        assert await canceller.cancel_child(queued.shared_run_id, TENANT, "parent cancelled") is True
        assert (await plane.run_status(queued.shared_run_id, TENANT)).shared_status == "Cancelled"
        events = [e.event for e in await ledger(runtime, shared_run_id=queued.shared_run_id)]
        assert "shared_run.cancelled" in events
        assert await canceller.cancel_child(running.shared_run_id, TENANT, "parent cancelled") is True
        assert (await plane.run_status(running.shared_run_id, TENANT)).control_status == "Cancelling"
    finally:
        gate.touch()
    assert run_final_status(await until_done(runtime, running.shared_run_id)) == "Cancelled"
    assert await canceller.cancel_child(running.shared_run_id, TENANT, "again") is True  # nothing left
