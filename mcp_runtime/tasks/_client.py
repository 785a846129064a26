"""Client side of the 2026-07-28 Tasks extension for SDK clients (`mcp.Client`).

Owns `TasksClientExtension`: passed to `Client(extensions=[...])`, it declares
`io.modelcontextprotocol/tasks` on every request and claims the `resultType: "task"` answer
of `tools/call`, so `client.call_tool(...)` follows the task (`tasks/get` at the interval
the server suggests, `tasks/update` with what an input handler answers) and returns the
tool result the task stands for. Also the single-request helpers `get_task`,
`update_task` and `cancel_task`. Must not know the server's internals.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp_types import CallToolResult, TextContent
from pydantic import TypeAdapter

from mcp_runtime.tasks._wire import (
    TASKS_EXTENSION,
    CancelTaskRequest,
    GetTaskRequest,
    TaskHandle,
    TaskIdParams,
    UpdateTaskParams,
    UpdateTaskRequest,
)

TaskInputHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""`(task_id, inputRequests) -> inputResponses` for `tasks/update`, or None to leave them
unanswered (someone else may answer, e.g. with `input.submit`)."""

_OBJECT = TypeAdapter(dict[str, Any])
_DEFAULT_POLL_MS = 1_000


class TasksClientExtension(ClientExtension):
    identifier = TASKS_EXTENSION

    def __init__(self, *, on_input: TaskInputHandler | None = None, timeout_s: float | None = None) -> None:
        self._on_input = on_input
        self._timeout_s = timeout_s

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._follow)]

    async def _follow(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        with anyio.fail_after(self._timeout_s):
            return await follow_task(ctx.session, handle.task_id, on_input=self._on_input)


async def follow_task(
    session: ClientSession, task_id: str, *, on_input: TaskInputHandler | None = None
) -> CallToolResult:
    """Poll the task until it is terminal; its tool result (an error result unless completed)."""
    answered: set[str] = set()
    while True:
        task = await get_task(session, task_id)
        if task["status"] == "completed":
            return CallToolResult.model_validate(task["result"], by_name=False)
        if task["status"] in ("failed", "cancelled"):
            text = task.get("statusMessage") or f"task {task_id} {task['status']}"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        pending = {key: ask for key, ask in (task.get("inputRequests") or {}).items() if key not in answered}
        responses = await on_input(task_id, pending) if pending and on_input is not None else None
        if responses:
            answered.update(responses)
            await update_task(session, task_id, responses)
            continue
        await anyio.sleep((task.get("pollIntervalMs") or _DEFAULT_POLL_MS) / 1000)


async def get_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    return await session.send_request(GetTaskRequest(params=TaskIdParams(task_id=task_id)), _OBJECT)


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> None:
    params = UpdateTaskParams(task_id=task_id, input_responses=responses)
    await session.send_request(UpdateTaskRequest(params=params), _OBJECT)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTaskRequest(params=TaskIdParams(task_id=task_id)), _OBJECT)
