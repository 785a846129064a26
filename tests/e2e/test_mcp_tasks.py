"""MCP Tasks end to end, both protocol eras, over streamable HTTP against two real
`mcp-runtime serve` processes on one Redis: every task is created on server A and read,
answered, cancelled and collected on server B (any control plane answers for any task).

2026-07-28: SDK clients in the stateless discovery flow, the `io.modelcontextprotocol/tasks`
extension (`resultType: "task"`, tasks/get, tasks/update, tasks/cancel, -32021).
2025-11-25: a session spoken on the wire (capability `tasks`, `task` parameter,
`execution.taskSupport`, tasks/get, tasks/result with elicitation, tasks/list, tasks/cancel).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult
from mcp_types.version import LATEST_MODERN_VERSION

from mcp_runtime import hash_token
from mcp_runtime.tasks import (
    RELATED_TASK_META_KEY,
    RUN_META_KEY,
    TASKS_EXTENSION,
    TaskHandle,
    TasksClientExtension,
    cancel_task,
    get_task,
    update_task,
)
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.steps import HumanApprovalExecutor
from tests.e2e.mcp_support import BearerClient, clean_environment
from tests.e2e.tasks_support import LegacyWireSession, WireError, two_servers
from tests.helpers import wait_until

ACME_TOKEN = "acme-operator-" + secrets.token_hex(8)
GLOBEX_TOKEN = "globex-operator-" + secrets.token_hex(8)
VIEWER_TOKEN = "acme-viewer-" + secrets.token_hex(8)
RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}
APPROVAL = {"pipeline": "human-approval", "input": {"candidateId": "c-1", "jobId": "j-1"}}
UNKNOWN_TASK = "task_" + "0" * 32
INVALID_PARAMS = -32602


def _write_config(path: Path) -> Path:
    def principal(user: str, tenant: str, token: str, role: str = "operator") -> dict[str, Any]:
        return {"user_id": user, "tenant_id": tenant, "roles": [role], "token_sha256": [hash_token(token)]}

    principals = {"acme-operator": principal("otto", "acme", ACME_TOKEN)}
    principals["globex-operator"] = principal("gus", "globex", GLOBEX_TOKEN)
    principals["acme-viewer"] = principal("vera", "acme", VIEWER_TOKEN, role="viewer")
    path.write_text(json.dumps({"principals": principals}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def servers(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    data_dir, logs = tmp_path_factory.mktemp("tasks-data"), tmp_path_factory.mktemp("tasks-logs")
    env = clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_REDIS_PREFIX=f"mcptasks{secrets.token_hex(4)}:",
        MCP_RUNTIME_TASK_POLL_INTERVAL_MS="50",
    )
    with two_servers(_write_config(logs / "server.json"), data_dir, logs, env) as urls:
        yield urls


def tasks_client(url: str, token: str = ACME_TOKEN) -> BearerClient:
    return BearerClient(url, token, extensions=[TasksClientExtension()])


async def create_modern_task(url: str, arguments: dict[str, Any]) -> TaskHandle:
    async with tasks_client(url) as client:
        handle = await client.session.call_tool("submit", arguments, allow_claimed=True)
    assert isinstance(handle, TaskHandle), handle
    return handle


async def modern_status(client: Client, task_id: str, wanted: str) -> dict[str, Any]:
    async def reached() -> bool:
        return (await get_task(client.session, task_id))["status"] == wanted

    await wait_until(reached, timeout=60, interval=0.05)
    return await get_task(client.session, task_id)


async def create_legacy_task(url: str, arguments: dict[str, Any], ttl_ms: int = 60_000) -> dict[str, Any]:
    """The `CreateTaskResult` of a task-augmented `submit` (`task` and `_meta`)."""
    async with LegacyWireSession(url, ACME_TOKEN) as session:
        return await session.call_tool("submit", arguments, task={"ttl": ttl_ms})


async def legacy_status(session: LegacyWireSession, task_id: str, wanted: str) -> dict[str, Any]:
    async def reached() -> bool:
        return (await session.request("tasks/get", {"taskId": task_id}))["status"] == wanted

    await wait_until(reached, timeout=60, interval=0.05)
    return await session.request("tasks/get", {"taskId": task_id})


# 2026-07-28: the io.modelcontextprotocol/tasks extension


async def test_modern_discovery_advertises_the_tasks_extension(servers: tuple[str, str]) -> None:
    async with tasks_client(servers[0]) as client:
        assert client.protocol_version == LATEST_MODERN_VERSION
        assert TASKS_EXTENSION in (client.server_capabilities.extensions or {})


async def test_modern_submit_task_created_on_a_completes_on_b_with_the_run_status(
    servers: tuple[str, str],
) -> None:
    handle = await create_modern_task(servers[0], RAG)
    assert (handle.status, handle.ttl_ms, handle.poll_interval_ms) == ("working", 3_600_000, 50)
    async with tasks_client(servers[1]) as b:
        done = await modern_status(b, handle.task_id, "completed")
        result = CallToolResult.model_validate(done["result"], by_name=False)
        await b.session.validate_tool_result("submit", result)  # the submit tool's own output schema
    answer = result.structured_content
    assert answer is not None and answer["run"]["execution_status"] == "Completed" and answer["run"]["done"]
    assert answer["shared_run_id"] == answer["run"]["shared_run_id"]


async def test_modern_human_approval_is_answered_through_tasks_update_on_b(servers: tuple[str, str]) -> None:
    handle = await create_modern_task(servers[0], APPROVAL)
    async with tasks_client(servers[1]) as b:
        waiting = await modern_status(b, handle.task_id, "input_required")
        ask = waiting["inputRequests"]["hire-approval"]
        assert (
            ask["method"] == "elicitation/create" and ask["params"]["message"] == "Approve the hire decision?"
        )
        assert ask["params"]["requestedSchema"] == HumanApprovalExecutor.input_schema
        await update_task(
            b.session, handle.task_id, {"hire-approval": {"action": "accept", "content": {"approved": True}}}
        )
        done = await modern_status(b, handle.task_id, "completed")
    run = done["result"]["structuredContent"]["run"]
    assert run["result"]["data"]["approved"] is True and run["waiting_key"] is None


async def test_modern_cancel_on_b_cancels_the_run_created_on_a(servers: tuple[str, str]) -> None:
    handle = await create_modern_task(servers[0], APPROVAL)
    assert handle.meta is not None
    run_id = handle.meta[RUN_META_KEY]["runId"]
    async with tasks_client(servers[1]) as b:
        await modern_status(b, handle.task_id, "input_required")
        await cancel_task(b.session, handle.task_id)
        assert (await get_task(b.session, handle.task_id))["status"] == "cancelled"

        async def run_cancelled() -> bool:
            run = await b.call_tool("run.status", {"run_id": run_id})
            return (
                run.structured_content is not None
                and run.structured_content["execution_status"] == "Cancelled"
            )

        await wait_until(run_cancelled, timeout=60, interval=0.05)
        await cancel_task(b.session, handle.task_id)  # a terminal task: still acknowledged
        assert (await get_task(b.session, handle.task_id))["status"] == "cancelled"


async def test_modern_client_without_the_extension_keeps_todays_flow(servers: tuple[str, str]) -> None:
    handle = await create_modern_task(servers[0], RAG)
    async with BearerClient(servers[1], ACME_TOKEN) as plain:
        submitted = await plain.call_tool("submit", RAG)
        assert not submitted.is_error and submitted.structured_content is not None
        assert submitted.structured_content["status"] == "QueuedGlobally"
        with pytest.raises(MCPError) as refused:
            await get_task(plain.session, handle.task_id)
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


async def test_modern_task_of_another_tenant_reads_exactly_like_an_unknown_one(
    servers: tuple[str, str],
) -> None:
    handle = await create_modern_task(servers[0], RAG)
    async with tasks_client(servers[1], GLOBEX_TOKEN) as globex:
        answers = []
        for task_id in (handle.task_id, UNKNOWN_TASK):
            with pytest.raises(MCPError) as refused:
                await get_task(globex.session, task_id)
            answers.append((refused.value.error.code, refused.value.error.message.replace(task_id, "ID")))
            with pytest.raises(MCPError):
                await cancel_task(globex.session, task_id)
    assert answers[0] == answers[1] and answers[0][0] == INVALID_PARAMS
    assert answers[0][1].startswith("[not_found] Task 'ID' not found.")


async def test_task_methods_need_the_permissions_of_what_they_do_to_the_run(servers: tuple[str, str]) -> None:
    handle = await create_modern_task(servers[0], APPROVAL)
    async with tasks_client(servers[1], VIEWER_TOKEN) as viewer:
        await modern_status(viewer, handle.task_id, "input_required")  # run:read
        refusals = []
        for attempt in (
            lambda: cancel_task(viewer.session, handle.task_id),  # run:cancel
            lambda: update_task(viewer.session, handle.task_id, {"hire-approval": {"action": "decline"}}),
        ):
            with pytest.raises(MCPError) as refused:
                await attempt()
            refusals.append(refused.value.error)
        denied_submit = await viewer.call_tool("submit", RAG)  # run:submit: an error result, no task
    assert [error.code for error in refusals] == [-32600, -32600]
    assert all(error.message.startswith("[permission_denied]") for error in refusals)
    assert "'run:cancel'" in refusals[0].message and "'run:input'" in refusals[1].message
    assert denied_submit.is_error and denied_submit.content[0].text.startswith("[permission_denied]")  # type: ignore[union-attr]
    async with tasks_client(servers[1]) as operator:
        await cancel_task(operator.session, handle.task_id)


async def test_modern_call_tool_follows_the_task_and_answers_its_input(servers: tuple[str, str]) -> None:
    asked: list[dict[str, Any]] = []

    async def approve(task_id: str, requests: dict[str, Any]) -> dict[str, Any]:
        asked.append(requests)
        return {key: {"action": "accept", "content": {"approved": False}} for key in requests}

    async with BearerClient(
        servers[0], ACME_TOKEN, [TasksClientExtension(on_input=approve, timeout_s=60)]
    ) as a:
        result = await a.call_tool("submit", APPROVAL)
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["run"]["result"]["data"]["approved"] is False
    assert [list(requests) for requests in asked] == [["hire-approval"]]


async def test_modern_replay_runs_as_a_task_that_follows_the_execution(servers: tuple[str, str]) -> None:
    async with tasks_client(servers[0]) as a:
        finished = await a.call_tool("submit", RAG)  # followed to the end as a task
        assert finished.structured_content is not None
        execution_id = finished.structured_content["run"]["execution_id"]
        handle = await a.session.call_tool("replay", {"execution_id": execution_id}, allow_claimed=True)
    assert isinstance(handle, TaskHandle) and handle.meta is not None
    assert handle.meta[RUN_META_KEY] == {"tool": "replay", "runId": execution_id}
    async with tasks_client(servers[1]) as b:
        done = await modern_status(b, handle.task_id, "completed")
        result = CallToolResult.model_validate(done["result"], by_name=False)
        await b.session.validate_tool_result("replay", result)
    assert result.structured_content is not None
    assert result.structured_content["already_exists"] is True
    assert result.structured_content["run"]["execution_status"] == "Completed"


# 2025-11-25: the experimental Tasks


async def test_legacy_initialize_and_tools_list_declare_task_support(servers: tuple[str, str]) -> None:
    async with LegacyWireSession(servers[0], ACME_TOKEN) as session:
        assert session.initialized["protocolVersion"] == "2025-11-25"
        tasks = session.initialized["capabilities"]["tasks"]
        assert tasks == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        tools = {tool["name"]: tool for tool in (await session.request("tools/list"))["tools"]}
    assert tools["submit"]["execution"] == tools["replay"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["run.status"]


async def test_legacy_task_created_on_a_is_collected_with_tasks_result_on_b(servers: tuple[str, str]) -> None:
    task = (await create_legacy_task(servers[0], RAG, ttl_ms=120_000))["task"]
    assert (task["status"], task["ttl"], task["pollInterval"]) == ("working", 120_000, 50)
    async with LegacyWireSession(servers[1], ACME_TOKEN) as b:
        await legacy_status(b, task["taskId"], "completed")
        payload = await b.request("tasks/result", {"taskId": task["taskId"]})
        listed = (await b.request("tasks/list"))["tasks"]
    assert payload["_meta"][RELATED_TASK_META_KEY] == {"taskId": task["taskId"]}
    assert (
        not payload.get("isError") and payload["structuredContent"]["run"]["execution_status"] == "Completed"
    )
    assert "resultType" not in payload  # the 2025-11-25 CallToolResult shape
    assert task["taskId"] in {listed_task["taskId"] for listed_task in listed}


async def test_legacy_human_approval_is_answered_through_tasks_result_elicitation_on_b(
    servers: tuple[str, str],
) -> None:
    task = (await create_legacy_task(servers[0], APPROVAL))["task"]
    asked: list[dict[str, Any]] = []

    async def approve(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"approved": True, "comment": "welcome"}}

    async with LegacyWireSession(servers[1], ACME_TOKEN, on_server_request=approve) as b:
        waiting = await legacy_status(b, task["taskId"], "input_required")
        payload = await b.request("tasks/result", {"taskId": task["taskId"]})
        assert (await b.request("tasks/get", {"taskId": task["taskId"]}))["status"] == "completed"
    assert "hire-approval" in waiting["statusMessage"]
    [elicitation] = asked
    assert elicitation["method"] == "elicitation/create"
    assert elicitation["params"]["_meta"][RELATED_TASK_META_KEY] == {"taskId": task["taskId"]}
    assert elicitation["params"]["requestedSchema"] == HumanApprovalExecutor.input_schema
    assert payload["structuredContent"]["run"]["result"]["data"]["input"]["comment"] == "welcome"


async def test_legacy_cancel_on_b_then_cancelling_again_is_invalid_params(servers: tuple[str, str]) -> None:
    task = (await create_legacy_task(servers[0], APPROVAL))["task"]
    async with LegacyWireSession(servers[1], ACME_TOKEN) as b:
        await legacy_status(b, task["taskId"], "input_required")
        cancelled = await b.request("tasks/cancel", {"taskId": task["taskId"]})
        with pytest.raises(WireError) as again:
            await b.request("tasks/cancel", {"taskId": task["taskId"]})
        payload = await b.request("tasks/result", {"taskId": task["taskId"]})
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task["taskId"]
    assert again.value.code == INVALID_PARAMS and "terminal status 'cancelled'" in again.value.message
    assert payload["isError"] and payload["content"][0]["text"].startswith("[cancelled]")


async def test_legacy_task_expires_with_its_requested_ttl(servers: tuple[str, str]) -> None:
    created = await create_legacy_task(servers[0], APPROVAL, ttl_ms=1_000)
    task = created["task"]
    assert task["ttl"] == 1_000
    async with LegacyWireSession(servers[1], ACME_TOKEN) as b:

        async def expired() -> bool:
            try:
                await b.request("tasks/get", {"taskId": task["taskId"]})
            except WireError as gone:
                return gone.code == INVALID_PARAMS and "[not_found]" in gone.message
            return False

        await wait_until(expired, timeout=30, interval=0.1)
        assert task["taskId"] not in {listed["taskId"] for listed in (await b.request("tasks/list"))["tasks"]}
        # The task is gone, its run is not: it still waits for input until cancelled.
        cancelled = await b.call_tool("cancel", {"run_id": created["_meta"][RUN_META_KEY]["runId"]})
        assert not cancelled.get("isError"), cancelled


async def test_legacy_task_of_another_tenant_reads_exactly_like_an_unknown_one(
    servers: tuple[str, str],
) -> None:
    task = (await create_legacy_task(servers[0], RAG))["task"]
    async with LegacyWireSession(servers[1], GLOBEX_TOKEN) as globex:
        answers = []
        for task_id in (task["taskId"], UNKNOWN_TASK):
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                with pytest.raises(WireError) as refused:
                    await globex.request(method, {"taskId": task_id})
                answers.append((method, refused.value.code, refused.value.message.replace(task_id, "ID")))
        listed = (await globex.request("tasks/list"))["tasks"]
    assert answers[:3] == answers[3:]
    assert task["taskId"] not in {listed_task["taskId"] for listed_task in listed}


async def test_legacy_task_parameter_on_a_tool_without_task_support_is_method_not_found(
    servers: tuple[str, str],
) -> None:
    async with LegacyWireSession(servers[0], ACME_TOKEN) as session:
        with pytest.raises(WireError) as refused:
            await session.call_tool("pipelines.list", {}, task={"ttl": 60_000})
        plain = await session.call_tool("submit", RAG)  # no `task`: today's answer
    assert refused.value.code == -32601 and refused.value.message.startswith("[task_not_supported]")
    assert plain["structuredContent"]["status"] == "QueuedGlobally" and "task" not in plain


# Conformance of the tools themselves in both eras


async def test_tool_errors_start_with_their_code_in_both_eras(servers: tuple[str, str]) -> None:
    async with BearerClient(servers[0], ACME_TOKEN) as modern:
        result = await modern.call_tool("run.status", {"run_id": "srun_unknown"})
    async with LegacyWireSession(servers[1], ACME_TOKEN) as legacy:
        payload = await legacy.call_tool("run.status", {"run_id": "srun_unknown"})
    texts = [result.content[0].text, payload["content"][0]["text"]]  # type: ignore[union-attr]
    assert result.is_error and payload["isError"]
    assert all(text.startswith("[not_found] Run 'srun_unknown' not found.") for text in texts), texts


async def test_run_status_exposes_the_waiting_key_while_a_run_waits_for_input(
    servers: tuple[str, str],
) -> None:
    created = await create_legacy_task(servers[0], APPROVAL)
    task = created["task"]
    async with LegacyWireSession(servers[1], ACME_TOKEN) as b:
        await legacy_status(b, task["taskId"], "input_required")
        run_id = created["_meta"][RUN_META_KEY]["runId"]
        status = (await b.call_tool("run.status", {"run_id": run_id}))["structuredContent"]
        await b.request("tasks/cancel", {"taskId": task["taskId"]})
    assert (status["control_status"], status["waiting_key"]) == ("WaitingForInput", "hire-approval")
