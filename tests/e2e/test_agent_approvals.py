"""An approval-gated agent tool through a real `mcp-runtime serve` process (MCP over HTTP and the
dashboard): the agent parks before the call; an answer through MCP (`input.submit`) or through
the dashboard's input form resumes it; approved, the tool runs once; refused, it never runs
and the model reads the refusal. The run page shows the conversation beside the graph."""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from mcp_runtime.tasks import TaskHandle, TasksClientExtension, get_task, update_task
from runtime_core.hot_state import EmbeddedRedis
from tests.agent_support import API_KEY, KEY_ENV, LoopbackLlm, served_model, served_peer, write_providers
from tests.e2e.dashboard_support import (
    TOKENS,
    call,
    csrf_token,
    dashboard_environment,
    mcp_session,
    sign_in,
    write_config,
)
from tests.e2e.mcp_support import BearerClient, served_http
from tests.helpers import wait_until
from tests.side_effect_peer import SideEffectPeer

SCRIPT = [
    {
        "text": "I will file it.",
        "tool_calls": [{"name": "file_note", "arguments": {"note": "deploy at noon"}}],
    },
    {"text": "Done: the note is handled."},
]


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[tuple[LoopbackLlm, str]]:
    async with served_model(SCRIPT) as served:
        yield served


@pytest.fixture(scope="module")
async def peer() -> AsyncIterator[tuple[SideEffectPeer, str]]:
    async with served_peer() as served:
        yield served


@pytest.fixture(scope="module")
def base_url(
    model: tuple[LoopbackLlm, str], redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("agent-approvals")
    providers = write_providers(data_dir, model[1])
    env = {**dashboard_environment(redis_server.url), KEY_ENV: API_KEY}
    with served_http(
        write_config(data_dir / "server.json"), data_dir, env, "--providers-file", str(providers)
    ) as url:
        yield url


def agent_run(peer_url: str) -> dict[str, Any]:
    tool = {
        "name": "file_note",
        "stepKey": "tool.http",
        "config": {"url": f"{peer_url}/effects/idempotent", "method": "POST", "onUncertain": "retry"},
        "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}},
        "requiresApproval": True,
    }
    config = {"prompt": "File the note ({tag})", "provider": "gpt", "tools": [tool]}
    step = {"name": "agent", "stepKey": "ai.agent", "input": {"tag": "state.tag"}, "config": config}
    return {
        "definition": {"name": "approved-agent", "steps": [step]},
        "input": {"tag": secrets.token_hex(4)},
        "mode": "DirectDispatch",
    }


async def parked_agent(base_url: str, peer_url: str) -> dict[str, Any]:
    async with mcp_session(base_url, "acme-operator") as acme:
        run_id = (await call(acme, "submit", agent_run(peer_url)))["shared_run_id"]

        async def parked() -> bool:
            return (await call(acme, "run.status", {"run_id": run_id}))["control_status"] == "WaitingForInput"

        await wait_until(parked, timeout=60, interval=0.05)
        return await call(acme, "run.status", {"run_id": run_id})


async def finished(base_url: str, run_id: str) -> dict[str, Any]:
    async with mcp_session(base_url, "acme-operator") as acme:

        async def done() -> bool:
            return bool((await call(acme, "run.status", {"run_id": run_id}))["done"])

        await wait_until(done, timeout=60, interval=0.05)
        return await call(acme, "run.status", {"run_id": run_id})


async def test_an_approval_answered_through_mcp_resumes_the_agent_and_the_tool_runs_once(
    base_url: str, peer: tuple[SideEffectPeer, str]
) -> None:
    before = peer[0].total_effects
    run = await parked_agent(base_url, peer[1])
    assert run["waiting_key"] == "agent.approval.1"
    assert run["waiting_input"]["expected_input"]["required"] == ["approved"]
    assert peer[0].total_effects == before
    async with mcp_session(base_url, "acme-operator") as acme:
        answer = {
            "execution_id": run["execution_id"],
            "waiting_key": "agent.approval.1",
            "payload": {"approved": True},
        }
        await call(acme, "input.submit", answer)
    final = await finished(base_url, run["shared_run_id"])
    assert final["execution_status"] == "Completed"
    assert peer[0].total_effects - before == 1
    assert final["result"]["data"]["text"] == "Done: the note is handled."


async def test_a_refusal_through_the_dashboard_skips_the_tool_and_the_page_shows_the_conversation(
    base_url: str, model: tuple[LoopbackLlm, str], peer: tuple[SideEffectPeer, str]
) -> None:
    before = peer[0].total_effects
    run = await parked_agent(base_url, peer[1])
    run_id = run["shared_run_id"]
    with sign_in(base_url, "acme-operator") as operator:
        page = operator.get(f"/ui/runs/{run_id}").text
        assert 'id="conversation"' in page and "Model turn 0" in page and "I will file it." in page
        form = {
            "csrf": csrf_token(page),
            "waiting_key": "agent.approval.1",
            "field_approved": "false",
            "field_comment": "not during the freeze",
        }
        answered = operator.post(f"/ui/runs/{run_id}/input", data=form)
        assert answered.status_code == 303, answered.text
        final = await finished(base_url, run_id)
        page = operator.get(f"/ui/runs/{run_id}").text
    assert final["execution_status"] == "Completed"
    assert peer[0].total_effects == before  # refused: the tool never ran
    told = model[0].requests[-1]["messages"][-1]
    assert told["role"] == "tool" and "not during the freeze" in told["content"]
    assert (
        re.search(r'data-state="refused"', page) and "approval</code> refused: not during the freeze" in page
    )


async def test_an_agent_run_as_an_mcp_task_asks_for_the_approval_and_the_answer_resumes_it(
    base_url: str, peer: tuple[SideEffectPeer, str]
) -> None:
    before = peer[0].total_effects
    tasks = BearerClient(f"{base_url}/mcp", TOKENS["acme-operator"], extensions=[TasksClientExtension()])
    async with tasks as client:
        handle = await client.session.call_tool("submit", agent_run(peer[1]), allow_claimed=True)
        assert isinstance(handle, TaskHandle), handle

        async def status_is(wanted: str) -> dict[str, Any]:
            async def reached() -> bool:
                return (await get_task(client.session, handle.task_id))["status"] == wanted

            await wait_until(reached, timeout=60, interval=0.05)
            return await get_task(client.session, handle.task_id)

        waiting = await status_is("input_required")
        ask = waiting["inputRequests"]["agent.approval.1"]
        assert ask["method"] == "elicitation/create" and "file_note" in ask["params"]["message"]
        assert ask["params"]["requestedSchema"]["required"] == ["approved"]
        answer = {"agent.approval.1": {"action": "accept", "content": {"approved": True}}}
        await update_task(client.session, handle.task_id, answer)
        done = await status_is("completed")
    run = done["result"]["structuredContent"]["run"]
    assert run["result"]["data"]["text"] == "Done: the note is handled."
    assert peer[0].total_effects - before == 1
