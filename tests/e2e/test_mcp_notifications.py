"""Run notifications and idempotent submit across two real `mcp-runtime serve` processes on
one Redis, over streamable HTTP (issue 15 items 3 and 4).

Server A runs no runtime instance and no pump: it can execute nothing. Every run is
submitted through server B and executed by B's runtime instance, and a client connected to
A still hears it change, through Redis pub/sub: with `subscriptions/listen` (2026-07-28) and
with `resources/subscribe` (2025-11-25). One idempotency key sent 50 times to both servers at
once makes one run. A submit carrying a progress token (the SDK client sends one with a progress
callback) reports progress over HTTP and answers once the run is done.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import warnings
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceUpdatedNotification

from mcp_runtime import hash_token
from runtime_core.hot_state import EmbeddedRedis
from tests.e2e.mcp_support import BearerClient, clean_environment
from tests.e2e.tasks_support import two_servers
from tests.helpers import wait_until

TOKEN = "acme-operator-" + secrets.token_hex(8)
APPROVAL = {"pipeline": "human-approval", "input": {"candidateId": "c-1", "jobId": "j-1"}}
RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}


@pytest.fixture(scope="module")
def servers(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    data_dir, logs = tmp_path_factory.mktemp("notify-data"), tmp_path_factory.mktemp("notify-logs")
    config = logs / "server.json"
    principal = {
        "user_id": "otto",
        "tenant_id": "acme",
        "roles": ["operator"],
        "token_sha256": [hash_token(TOKEN)],
    }
    config.write_text(json.dumps({"principals": {"acme-operator": principal}}), encoding="utf-8")
    env = clean_environment(
        REDIS_URL=redis_server.url, MCP_RUNTIME_REDIS_PREFIX=f"mcpev{secrets.token_hex(4)}:"
    )
    idle = {"MCP_RUNTIME_LOCAL_INSTANCES": "0", "MCP_RUNTIME_BACKGROUND_PUMP": "false"}
    with two_servers(config, data_dir, logs, env, own_env={"a": idle}) as urls:
        yield urls


async def call(client: Client, tool: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments, **options)
    assert not result.is_error and result.structured_content is not None, result.content
    return result.structured_content


async def waiting_run_on_b(url_b: str) -> tuple[str, str]:
    """A human-approval run submitted and executed through B, parked waiting for input."""
    async with BearerClient(url_b, TOKEN) as client:
        run_id = (await call(client, "submit", APPROVAL))["shared_run_id"]

        async def waiting() -> bool:
            status = await call(client, "run.status", {"run_id": run_id})
            return status["control_status"] == "WaitingForInput"

        await wait_until(waiting, timeout=60, interval=0.05)
        status = await call(client, "run.status", {"run_id": run_id})
    assert (
        status["assigned_runtime_instance_id"].startswith("rt_")
        and "-b:" in status["assigned_runtime_instance_id"]
    )
    return run_id, status["execution_id"]


async def approve_on_b(url_b: str, execution_id: str) -> None:
    async with BearerClient(url_b, TOKEN) as client:
        await call(
            client,
            "input.submit",
            {"execution_id": execution_id, "waiting_key": "hire-approval", "payload": {"approved": True}},
        )


async def read_run(client: Client, run_id: str) -> dict[str, Any]:
    content = await client.read_resource(f"run://{run_id}")
    return json.loads(content.contents[0].text)  # type: ignore[union-attr]


async def test_a_listen_stream_on_a_hears_a_run_executed_through_b_finish(servers: tuple[str, str]) -> None:
    url_a, url_b = servers
    run_id, execution_id = await waiting_run_on_b(url_b)
    async with BearerClient(url_a, TOKEN) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[f"run://{run_id}"]) as stream:
            await approve_on_b(url_b, execution_id)
            async with asyncio.timeout(60):
                async for event in stream:
                    assert event.uri == f"run://{run_id}"
                    if (await read_run(client, run_id))["done"]:
                        break
        final = await read_run(client, run_id)
    assert final["execution_status"] == "Completed" and final["local_status"] == "Completed"


async def test_a_legacy_subscriber_on_a_is_told_when_a_run_executed_through_b_finishes(
    servers: tuple[str, str],
) -> None:
    url_a, url_b = servers
    run_id, execution_id = await waiting_run_on_b(url_b)
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updates.append(message.params.uri)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    transport = streamable_http_client(url_a, http_client=http)
    async with http, Client(transport, mode="legacy", message_handler=on_message) as client:
        assert client.protocol_version == "2025-11-25"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe is deprecated from 2026-07-28, current here
            await client.subscribe_resource(f"run://{run_id}")
        await approve_on_b(url_b, execution_id)

        async def told_done() -> bool:
            return bool(updates) and (await read_run(client, run_id))["done"]

        await wait_until(told_done, timeout=60, interval=0.05)
    assert set(updates) == {f"run://{run_id}"}


async def test_one_idempotency_key_sent_to_both_servers_at_once_makes_one_run(
    servers: tuple[str, str],
) -> None:
    key = f"e2e-{secrets.token_hex(6)}"
    async with BearerClient(servers[0], TOKEN) as a, BearerClient(servers[1], TOKEN) as b:
        answers = await asyncio.gather(
            *(call(client, "submit", {**RAG, "idempotency_key": key}) for client in (a, b) * 25)
        )
    assert len({answer["shared_run_id"] for answer in answers}) == 1
    assert sum(not answer["deduplicated"] for answer in answers) == 1


async def test_a_submit_with_a_progress_callback_over_http_reports_progress_until_done(
    servers: tuple[str, str],
) -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    async with BearerClient(servers[1], TOKEN) as client:
        answer = await call(client, "submit", RAG, progress_callback=progress)
    assert answer["run"]["done"] is True and answer["run"]["execution_status"] == "Completed"
    assert reports and reports[-1][0] == reports[-1][1] == len(answer["run"]["steps"])
