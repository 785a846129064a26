"""`mcp.tool` through real MCP client sessions of two tenants (issue 31.1): `steps.list` shows
each tenant its own MCP servers' tools with their input schemas and nothing of the other's;
`submit` refuses a step whose input does not fit the tool's schema, and another tenant's server
exactly like an unknown one, queuing nothing; a valid run goes submit -> drain -> run.status
with the tool's structured result. The MCP server is the example server, a real process.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from mcp_runtime import Principal
from runtime_core.bootstrap import RuntimeServices
from runtime_core.hot_state import EmbeddedRedis
from tests.helpers import wait_until
from tests.mcp_tool_server import http_entry, side_effects_server, stdio_entry
from tests.reliability.mcp_rig import failed, held_session, ok, runtime_settings, server_for, tool_backend

ACME = Principal(name="acme-op", user_id="ann", tenant_id="acme", roles=("operator",))
GLOBEX = Principal(name="globex-op", user_id="gus", tenant_id="globex", roles=("operator",))


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeServices]:
    data_dir = tmp_path_factory.mktemp("mcp-sessions")
    effects = data_dir / "effects.jsonl"
    async with side_effects_server(effects) as url:
        providers = {
            "mcp_servers": {
                "acme": {"tickets": http_entry(url, allowed_tools=["create_ticket", "lookup"])},
                "globex": {"mail": stdio_entry(effects, allowed_tools=["send_email"])},
            }
        }
        (data_dir / "providers.json").write_text(json.dumps(providers))
        settings = runtime_settings(redis_server.url, data_dir)
        settings.providers_file = data_dir / "providers.json"
        async with RuntimeServices(settings) as started:
            yield started


@pytest.fixture(scope="module")
async def acme(services: RuntimeServices) -> AsyncIterator[Client]:
    async with held_session(server_for(tool_backend(services), ACME)) as session:
        yield session


@pytest.fixture(scope="module")
async def globex(services: RuntimeServices) -> AsyncIterator[Client]:
    async with held_session(server_for(tool_backend(services), GLOBEX)) as session:
        yield session


def ticket_pipeline(server: str, step_input: dict[str, Any]) -> dict[str, Any]:
    step = {"name": "file", "stepKey": "mcp.tool", "input": step_input}
    step["config"] = {"server": server, "tool": "create_ticket", "onUncertain": "retry"}
    return {"name": "file-ticket", "steps": [step]}


async def test_steps_list_shows_each_tenant_only_its_own_servers_and_their_tools(
    acme: Client, globex: Client
) -> None:
    mine = (await ok(acme, "steps.list", {"step_key": "mcp.tool"}))["mcp_servers"]
    theirs = (await ok(globex, "steps.list", {}))["mcp_servers"]

    [tickets] = mine
    assert (tickets["server"], tickets["transport"], tickets["error"]) == ("tickets", "http", None)
    tools = {tool["tool"]: tool for tool in tickets["tools"]}
    assert sorted(tools) == ["create_ticket", "lookup"]  # narrowed by allowed_tools
    assert tools["create_ticket"]["input_schema"]["required"] == ["title"]
    assert tools["create_ticket"]["idempotent"] is True and tools["lookup"]["read_only"] is True
    assert [(s["server"], [t["tool"] for t in s["tools"]]) for s in theirs] == [("mail", ["send_email"])]


async def test_submit_refuses_input_that_does_not_fit_the_tool_schema_and_queues_nothing(
    services: RuntimeServices, acme: Client
) -> None:
    queued = await services.control_plane.parts.queue.pending_count()

    refused = await failed(acme, "submit", {"definition": ticket_pipeline("tickets", {"priority": 9})})
    checked = await ok(
        acme, "pipelines.validate", {"definition": ticket_pipeline("tickets", {"priority": 9})}
    )

    assert "[invalid_pipeline] Rule tenant_step_check" in refused
    assert "missing required argument(s) title" in refused
    assert checked["valid"] is False and checked["problem"]["rule"] == "tenant_step_check"
    assert await services.control_plane.parts.queue.pending_count() == queued


async def test_another_tenants_server_is_refused_at_submit_like_an_unknown_server(globex: Client) -> None:
    foreign = await failed(globex, "submit", {"definition": ticket_pipeline("tickets", {"title": "x"})})
    unknown = await failed(globex, "submit", {"definition": ticket_pipeline("nowhere", {"title": "x"})})

    assert foreign.replace("'tickets'", "'<server>'") == unknown.replace("'nowhere'", "'<server>'")
    assert "configured: mail" in foreign


async def test_a_mcp_tool_run_completes_through_submit_drain_and_run_status(acme: Client) -> None:
    pipeline = ticket_pipeline("tickets", {"title": "state.title"})
    run_id = (await ok(acme, "submit", {"definition": pipeline, "input": {"title": "disk full"}}))[
        "shared_run_id"
    ]
    await ok(acme, "queue.drain", {"max_count": 5})
    status: dict[str, Any] = {}

    async def done() -> bool:
        status.update(await ok(acme, "run.status", {"run_id": run_id}))
        return bool(status["done"])

    await wait_until(done, timeout=30, interval=0.05)
    assert status["execution_status"] == "Completed", status
    result = status["result"]  # the only sink step's result
    assert result["data"]["title"] == "disk full" and result["data"]["operation_id"] == result["operationId"]
