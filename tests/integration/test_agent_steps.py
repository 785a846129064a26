"""`ai.agent` through the engine (real Redis, the durable store) against the loopback LLM server in both
wire formats: tools that are step types (`tool.http` to a loopback peer counting its side
effects), the transcript as checkpoints, approvals that park the agent (approved: the tool
runs once; refused: it never runs and the model is told), limits as typed failures, streamed
turns equal to unstreamed ones."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime_core.agents import read_sub_steps
from runtime_core.bootstrap import EngineServices, RuntimeSettings
from runtime_core.dag import read_live_output
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.observability import tracing_with
from runtime_core.pipeline import parse_pipeline
from runtime_core.recovery import release_execution_claims
from runtime_core.steps import PROVIDER_RULE, STEP_CONFIG_RULE, TENANT_RULE
from tests.agent_support import (
    API_KEY,
    KEY_ENV,
    LoopbackLlm,
    served_model,
    served_peer,
    write_providers,
)
from tests.helpers import wait_until
from tests.mcp_tool_server import Effects, http_entry, side_effects_server
from tests.side_effect_peer import SideEffectPeer

TENANT = "tenant-agents"
SNAPSHOT = ExecutionContextSnapshot(user_id="u-agent", tenant_id=TENANT, context_key="agent-tests")
OTHER_TENANT = ExecutionContextSnapshot(user_id="u-b", tenant_id="tenant-b", context_key="agent-tests")


def note_call(turn: int) -> dict[str, Any]:
    return {
        "tool_calls": [{"name": "file_note", "arguments": {"note": f"note {turn}"}}],
        "text": f"Filing {turn}.",
    }


FINAL = {"text": "All notes are filed."}


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[tuple[LoopbackLlm, str]]:
    async with served_model([FINAL]) as served:
        yield served


@pytest.fixture(scope="module")
async def peer() -> AsyncIterator[tuple[SideEffectPeer, str]]:
    async with served_peer() as served:
        yield served


@pytest.fixture(scope="module")
async def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Effects, str]]:
    effects_file = tmp_path_factory.mktemp("agent-mcp") / "effects.jsonl"
    async with side_effects_server(effects_file) as url:
        yield Effects(effects_file), url


@pytest.fixture(scope="module")
async def services(
    model: tuple[LoopbackLlm, str],
    mcp_server: tuple[Effects, str],
    redis_server: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[EngineServices]:
    folder = tmp_path_factory.mktemp("agents")
    servers = {TENANT: {"desk": http_entry(mcp_server[1], idempotent=True)}}  # tenant A's only
    providers_file = write_providers(folder, model[1], mcp_servers=servers)
    settings = RuntimeSettings(
        data_dir=folder / "data",
        redis_url=redis_server.url,
        redis_prefix=f"agent{secrets.token_hex(4)}:",
        providers_file=providers_file,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, API_KEY)
        async with EngineServices(settings) as started:
            yield started


def agent_pipeline(peer_url: str, provider: str, **config: Any) -> Any:
    tool = {
        "name": "file_note",
        "description": "File a note (a side effect).",
        "stepKey": "tool.http",
        "config": {"url": f"{peer_url}/effects/idempotent", "method": "POST", "onUncertain": "retry"},
        "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]},
    }
    tool.update(config.pop("tool", {}))
    step_config = {
        "prompt": "File the notes of {topic} ({run})",
        "provider": provider,
        "tools": [tool],
        **config,
    }
    return parse_pipeline(
        {
            "name": "agent-run",
            "steps": [
                {
                    "name": "agent",
                    "stepKey": "ai.agent",
                    "input": {"topic": "state.topic", "run": "state.run"},
                    "config": step_config,
                }
            ],
        }
    )


async def start(
    services: EngineServices, pipeline: Any, snapshot: ExecutionContextSnapshot = SNAPSHOT
) -> str:
    return await services.engine.create_execution(
        pipeline, {"topic": "ops", "run": secrets.token_hex(4)}, snapshot
    )


async def cut_off(services: EngineServices, run: asyncio.Task[str], execution_id: str, step: str) -> None:
    """The worker running `step` dies (its task cancelled); its claim is released the way recovery
    releases a dead instance's claims."""
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    now = await services.hot_state.server_time_ms()
    assert await release_execution_claims(services.dag_store, execution_id, claimed_before_ms=now) == [step]


async def ledger_events(services: EngineServices, execution_id: str) -> list[Any]:
    await services.audit.flush()
    return [entry for entry in await services.durable_store.list_ledger(TENANT, execution_id)]


async def result_of(services: EngineServices, execution_id: str) -> dict[str, Any]:
    execution = await services.dag_store.read_execution(execution_id)
    assert execution is not None
    (step,) = execution.steps
    decoded = await services.engine.results.decode(execution_id, {"agent": step.result}, SNAPSHOT)
    return decoded["agent"]


@pytest.mark.parametrize("provider", ["gpt", "claude"])
async def test_an_agent_calls_step_type_tools_until_it_answers_and_every_sub_step_is_a_checkpoint(
    services: EngineServices, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str], provider: str
) -> None:
    llm, _ = model
    llm.script = [note_call(0), note_call(1), FINAL]
    effects_before = peer[0].total_effects
    execution_id = await start(services, agent_pipeline(peer[1], provider))
    assert await services.engine.run(execution_id, workers=1) == "Completed"
    result = await result_of(services, execution_id)
    assert result["data"]["text"] == "All notes are filed."
    assert (result["data"]["turns"], result["data"]["toolCalls"]) == (3, 2)
    assert result["usage"]["inputTokens"] == 3 * 20 and result["usage"]["outputTokens"] == 3 * 8
    assert peer[0].total_effects - effects_before == 2
    sub_steps = await read_sub_steps(services.dag_store, execution_id, "agent")
    assert [(s.kind, s.state.value) for s in sub_steps] == [
        ("model", "completed"),
        ("tool", "completed"),
        ("model", "completed"),
        ("tool", "completed"),
        ("model", "completed"),
    ]
    assert sub_steps[1].input == {"note": "note 0"} and sub_steps[0].usage["inputTokens"] == 20
    assert all(s.ended_at_ms is not None and s.ended_at_ms >= s.started_at_ms for s in sub_steps)
    state = (await services.dag_store.read_execution(execution_id)).meta.state  # type: ignore[union-attr]
    conversation = [
        n for (c, _), n in llm.completed.items() if c == f"File the notes of ops ({state['run']})"
    ]
    assert conversation == [1, 1, 1]  # each turn completed once
    events = [entry.event for entry in await ledger_events(services, execution_id)]
    assert events.count("agent.turn_completed") == 3 and events.count("agent.tool_completed") == 2


@pytest.mark.parametrize("answer", [True, False], ids=["approved", "refused"])
async def test_an_approval_gated_tool_parks_the_agent_until_a_human_answers(
    services: EngineServices, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str], answer: bool
) -> None:
    llm, _ = model
    llm.script = [note_call(0), FINAL]
    effects_before = peer[0].total_effects
    execution_id = await start(services, agent_pipeline(peer[1], "gpt", tool={"requiresApproval": True}))
    assert await services.engine.run(execution_id, workers=1) == "WaitingForInput"
    control = await services.control.get(execution_id, SNAPSHOT)
    assert control.waiting_key == "agent.approval.1"
    assert peer[0].total_effects == effects_before  # nothing ran before the answer
    await services.control.submit_input(
        execution_id, "agent.approval.1", {"approved": answer, "comment": "not today"}, SNAPSHOT
    )
    assert await services.engine.run(execution_id, workers=1) == "Completed"
    assert peer[0].total_effects - effects_before == (1 if answer else 0)
    tool_result = llm.requests[-1]["messages"][-1]
    assert tool_result["role"] == "tool"
    if not answer:
        assert "refused" in tool_result["content"] and "not today" in tool_result["content"]
    states = [s.state.value for s in await read_sub_steps(services.dag_store, execution_id, "agent")]
    assert states == ["completed", "completed" if answer else "refused", "completed"]
    events = [entry.event for entry in await ledger_events(services, execution_id)]
    assert "agent.approval_requested" in events and "agent.approval_answered" in events


async def test_an_agent_past_its_turn_limit_fails_with_turn_limit(
    services: EngineServices, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str]
) -> None:
    llm, _ = model
    llm.script = [note_call(0), note_call(1), note_call(2), FINAL]
    execution_id = await start(services, agent_pipeline(peer[1], "claude", limits={"maxTurns": 2}))
    assert await services.engine.run(execution_id, workers=1) == "Failed"
    execution = await services.dag_store.read_execution(execution_id)
    assert execution is not None and execution.steps[0].last_error is not None
    assert execution.steps[0].last_error.code == "turn_limit"
    assert execution.steps[0].retry_count == 0  # never retried: a retry would only replay to the limit


async def test_a_cancelled_agent_stops_before_its_next_tool_call_and_the_run_ends_cancelled(
    services: EngineServices, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str]
) -> None:
    """Cancelled while its first model turn is under way: the turn finishes (its reply asks for
    a tool), then the agent stops instead of calling the tool or the model again."""
    llm, _ = model
    llm.script = [note_call(0), note_call(1), FINAL]
    llm.hold(0)
    effects_before = peer[0].total_effects
    execution_id = await start(services, agent_pipeline(peer[1], "gpt"))
    run = asyncio.create_task(services.engine.run(execution_id, workers=1))

    async def held() -> bool:
        return 0 in llm.waiting

    try:
        await wait_until(held, timeout=30)
        await services.control.cancel(execution_id, SNAPSHOT, reason="no longer needed")
    finally:
        llm.release(0)
    assert await asyncio.wait_for(run, 30) == "Cancelled"
    assert peer[0].total_effects == effects_before  # the tool the reply asked for never ran
    sub_steps = await read_sub_steps(services.dag_store, execution_id, "agent")
    assert [(s.kind, s.state.value) for s in sub_steps] == [("model", "completed")]
    events = [entry.event for entry in await ledger_events(services, execution_id)]
    assert events.count("agent.turn_completed") == 1 and "agent.tool_completed" not in events


async def test_a_streamed_agent_gives_the_result_of_an_unstreamed_one(
    services: EngineServices, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str]
) -> None:
    llm, _ = model
    llm.script = [note_call(0), FINAL]
    results = []
    same_input = {"topic": "ops", "run": secrets.token_hex(4)}
    for stream in (False, True):
        pipeline = agent_pipeline(peer[1], "claude", stream=stream)
        execution_id = await services.engine.create_execution(pipeline, same_input, SNAPSHOT)
        assert await services.engine.run(execution_id, workers=1) == "Completed"
        results.append(await result_of(services, execution_id))
    plain, streamed = results
    # Equal but for what the side-effect tool answered (its operation ids and effect numbers).
    assert {k: v for k, v in streamed.items() if k != "data"} == {
        k: v for k, v in plain.items() if k != "data"
    }
    assert (streamed["data"]["text"], streamed["data"]["turns"]) == (
        plain["data"]["text"],
        plain["data"]["turns"],
    )
    assert [s["output"] for s in streamed["data"]["transcript"] if s["kind"] == "model"] == [
        s["output"] for s in plain["data"]["transcript"] if s["kind"] == "model"
    ]
    assert "startedAtMs" not in streamed["data"]["transcript"][0]  # no times in a result


def mcp_agent(**ticket: Any) -> Any:
    tools = [
        {"name": "weather", "stepKey": "mcp.tool", "config": {"server": "desk", "tool": "lookup"}},
        {
            "name": "file_ticket",
            "stepKey": "mcp.tool",
            "config": {"server": "desk", "tool": "create_ticket"},
            **ticket,
        },
    ]
    agent = {"prompt": "Check the weather, then file a ticket ({run})", "provider": "claude", "tools": tools}
    step = {"name": "agent", "stepKey": "ai.agent", "input": {"run": "state.run"}, "config": agent}
    return parse_pipeline({"name": "mcp-agent", "steps": [step]})


MCP_SCRIPT = [
    {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
    {"tool_calls": [{"name": "file_ticket", "arguments": {"title": "Storm in Oslo", "priority": 2}}]},
    {"text": "Filed."},
]


async def test_an_agent_calls_an_mcp_servers_tools_offered_with_the_servers_own_schemas(
    services: EngineServices, model: tuple[LoopbackLlm, str], mcp_server: tuple[Effects, str]
) -> None:
    llm, _ = model
    llm.script = MCP_SCRIPT
    effects, _ = mcp_server
    before = sum(effects.effects("create_ticket").values())
    execution_id = await start(services, mcp_agent(requiresApproval=True))
    assert await services.engine.run(execution_id, workers=1) == "WaitingForInput"
    await services.control.submit_input(execution_id, "agent.approval.3", {"approved": True}, SNAPSHOT)
    assert await services.engine.run(execution_id, workers=1) == "Completed"
    offered = {tool["name"]: tool for tool in llm.requests[-1]["tools"]}
    assert offered["weather"]["input_schema"]["properties"]["city"]["type"] == "string"
    assert "priority" in offered["file_ticket"]["input_schema"]["properties"]
    assert sum(effects.effects("create_ticket").values()) - before == 1
    sub_steps = await read_sub_steps(services.dag_store, execution_id, "agent")
    assert sub_steps[1].output["text"] == '{"city":"Oslo","temp_c":4.0}'
    assert sub_steps[3].approval == {"approved": True} and sub_steps[3].state.value == "completed"


async def test_a_tenant_b_agent_cannot_reach_tenant_a_mcp_server(
    services: EngineServices, model: tuple[LoopbackLlm, str], mcp_server: tuple[Effects, str]
) -> None:
    llm, _ = model
    llm.script = MCP_SCRIPT
    effects, _ = mcp_server
    calls_before = len(effects.entries())
    declared = {"description": "File a ticket.", "inputSchema": {"type": "object", "properties": {}}}
    pipeline = parse_pipeline(
        {
            "name": "mcp-agent-b",
            "steps": [
                {
                    "name": "agent",
                    "stepKey": "ai.agent",
                    "config": {
                        "prompt": "File a ticket",
                        "provider": "claude",
                        "tools": [
                            {
                                "name": "file_ticket",
                                "stepKey": "mcp.tool",
                                "config": {"server": "desk", "tool": "create_ticket"},
                                **declared,
                            }
                        ],
                    },
                }
            ],
        }
    )
    llm.script = [MCP_SCRIPT[1], MCP_SCRIPT[2]]
    execution_id = await start(services, pipeline, OTHER_TENANT)
    assert await services.engine.run(execution_id, workers=1) == "Completed"
    told = llm.requests[-1]["messages"][-1]["content"][0]
    assert told["is_error"] is True and "desk" in told["content"]
    # exactly what a tenant without any server named `desk` reads
    assert services.step_providers.mcp.unknown_message("tenant-b", "desk") in told["content"]
    assert len(effects.entries()) == calls_before  # tenant A's server saw nothing


async def test_the_trace_shows_invoke_agent_chat_and_execute_tool_spans_with_token_usage(
    services: EngineServices, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str]
) -> None:
    llm, _ = model
    llm.script = [note_call(0), FINAL]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing_with(provider):
        execution_id = await start(services, agent_pipeline(peer[1], "gpt"))
        assert await services.engine.run(execution_id, workers=1) == "Completed"
    exported = {span.name: span for span in exporter.get_finished_spans()}
    agent, chat, tool = (
        exported["invoke_agent agent"],
        exported["chat gpt-loopback"],
        exported["execute_tool file_note"],
    )
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.provider.name"] == "openai"
    assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
    assert tool.parent is not None and tool.parent.span_id == agent.context.span_id
    assert (
        chat.attributes["gen_ai.usage.input_tokens"] == 20
        and chat.attributes["gen_ai.usage.output_tokens"] == 8
    )
    assert (
        tool.attributes["gen_ai.tool.name"] == "file_note"
        and tool.attributes["gen_ai.tool.call.id"] == "call_0_0"
    )
    # The stored trace (the `trace` tool) tells the same, without an exporter.
    await services.audit.flush()
    stored = await services.durable_store.list_spans(TENANT, execution_id)
    by_name = {span.name: span for span in stored}
    invoke = by_name["invoke_agent agent"]
    chats = [span for span in stored if span.name == "chat gpt-loopback"]
    assert len(chats) == 2 and all(span.parent_span_id == invoke.span_id for span in chats)
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 20
    assert by_name["execute_tool file_note"].parent_span_id == invoke.span_id
    assert invoke.parent_span_id == by_name["step agent"].span_id


@pytest.mark.parametrize(
    ("limits", "code"),
    [
        ({"limits": {"maxTokens": 50}}, "token_limit"),
        (
            {
                "limits": {"maxCostUsd": 0.05},
                "pricing": {"inputPerMillionTokens": 1000, "outputPerMillionTokens": 1000},
            },
            "cost_limit",
        ),
        ({"limits": {"maxWallTimeMs": 1}}, "time_limit"),
    ],
)
async def test_an_agent_past_its_token_cost_or_time_budget_fails_with_that_limit(
    services: EngineServices,
    model: tuple[LoopbackLlm, str],
    peer: tuple[SideEffectPeer, str],
    limits: dict[str, Any],
    code: str,
) -> None:
    llm, _ = model
    llm.script = [note_call(0), note_call(1), note_call(2), FINAL]  # 28 tokens a turn
    execution_id = await start(services, agent_pipeline(peer[1], "gpt", **limits))
    assert await services.engine.run(execution_id, workers=1) == "Failed"
    execution = await services.dag_store.read_execution(execution_id)
    assert execution is not None and execution.steps[0].last_error is not None
    assert execution.steps[0].last_error.code == code
    assert execution.steps[0].retry_count == 0


async def test_a_stream_cut_by_a_dead_worker_is_recorded_discarded_and_the_retry_gives_the_whole_reply(
    services: EngineServices, model: tuple[LoopbackLlm, str]
) -> None:
    llm, _ = model
    story = "A long reply, streamed slowly, word after word, until the worker that asked for it dies. " * 3
    llm.script, llm.piece_delay_s = [{"text": story}], 0.01
    step = {"name": "tell", "stepKey": "ai.prompt", "input": {"run": "state.run"}}
    step["config"] = {"template": "Tell it ({run})", "provider": "gpt", "stream": True}
    tag = secrets.token_hex(4)
    pipeline = parse_pipeline({"name": "cut-stream", "steps": [step]})
    execution_id = await services.engine.create_execution(pipeline, {"run": tag}, SNAPSHOT)
    first = asyncio.create_task(services.engine.run(execution_id, workers=1))

    async def partly_written() -> bool:
        written = await read_live_output(services.dag_store, execution_id)
        return "tell" in written and written["tell"][1] > 20

    try:
        await wait_until(partly_written, timeout=30)
    finally:
        await cut_off(services, first, execution_id, "tell")
        llm.piece_delay_s = 0.0
    assert await services.engine.run(execution_id, workers=1) == "Completed"
    result = await services.engine.results.decode(
        execution_id,
        {"tell": (await services.dag_store.read_execution(execution_id)).steps[0].result},
        SNAPSHOT,
    )
    assert result["tell"]["data"]["text"] == story
    [discarded] = [
        e for e in await ledger_events(services, execution_id) if e.event == "step.output_discarded"
    ]
    assert discarded.attributes["characters"] > 20
    assert llm.completed[(f"Tell it ({tag})", 0)] == 1  # the cut stream never completed


async def test_submitting_an_agent_whose_tool_names_another_tenants_mcp_server_is_refused(
    services: EngineServices,
) -> None:
    pipeline = mcp_agent()
    await services.engine.check_for_tenant(pipeline, SNAPSHOT)  # tenant A's own server: accepted
    with pytest.raises(InvalidPipelineError) as refused:
        await services.engine.check_for_tenant(pipeline, OTHER_TENANT)
    assert refused.value.rule == TENANT_RULE
    assert services.step_providers.mcp.unknown_message("tenant-b", "desk") in refused.value.message


async def test_a_model_turn_cut_off_under_ask_takes_the_reply_a_human_says_it_gave(
    services: EngineServices, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str]
) -> None:
    llm, _ = model
    llm.script = [FINAL]
    llm.hold(0)
    execution_id = await start(services, agent_pipeline(peer[1], "gpt", modelOnUncertain="ask"))
    first = asyncio.create_task(services.engine.run(execution_id, workers=1))

    async def held() -> bool:
        return 0 in llm.waiting

    try:
        await wait_until(held, timeout=30)
    finally:
        await cut_off(services, first, execution_id, "agent")
        llm.release(0)
    assert await services.engine.run(execution_id, workers=1) == "WaitingForInput"
    answer = {"decision": "done", "result": "Filed by hand."}
    await services.control.submit_input(execution_id, "agent.uncertain", answer, SNAPSHOT)

    assert await services.engine.run(execution_id, workers=1) == "Completed"
    assert (await result_of(services, execution_id))["data"]["text"] == "Filed by hand."


async def test_a_tools_config_is_checked_at_submit_as_the_same_steps_config_is(
    services: EngineServices, peer: tuple[SideEffectPeer, str]
) -> None:
    typo = agent_pipeline(peer[1], "gpt", tool={"config": {"url": f"{peer[1]}/effects", "methd": "POST"}})
    with pytest.raises(InvalidPipelineError) as unknown_key:
        services.engine.validate(typo)
    assert unknown_key.value.rule == STEP_CONFIG_RULE
    assert "tool 'file_note' (tool.http) has an unknown config key `methd`: did you mean `method`?" in (
        unknown_key.value.message
    )

    unconfigured = {"stepKey": "ai.prompt", "config": {"template": "{note}", "provider": "nowhere"}}
    with pytest.raises(InvalidPipelineError) as hook:
        services.engine.validate(agent_pipeline(peer[1], "gpt", tool=unconfigured))
    assert hook.value.rule == PROVIDER_RULE
    assert "tool 'file_note' (ai.prompt): " in hook.value.message and "'nowhere'" in hook.value.message
