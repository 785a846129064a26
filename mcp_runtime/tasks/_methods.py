"""The task methods of both eras, bound as SDK `MethodBinding`s on the Tasks extension.

2026-07-28 (`io.modelcontextprotocol/tasks`): `tasks/get` (the detailed task), `tasks/update`
(input responses; an empty ack) and `tasks/cancel` (an empty ack, also for a task that is
already terminal); each answers -32021 to a client whose request did not declare the
extension. 2025-11-25: `tasks/get` and `tasks/cancel` (the task; cancelling a terminal task
is -32602), `tasks/result` (blocks until terminal, then exactly the tool result) and
`tasks/list` (the caller tenant's tasks, cursor-paginated). One handler per method serves
both eras where both define it. Every method authorizes first, then asks the TaskService
(which treats another tenant's task id exactly like an unknown one).
Must not contain task behaviour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.extension import MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_runtime._errors import protocol_error
from mcp_runtime._guard import ToolGuard
from mcp_runtime.tasks._access import caller_snapshot
from mcp_runtime.tasks._shapes import legacy_payload, legacy_task, legacy_task_result, modern_detailed_task
from mcp_runtime.tasks._waiting import OutcomeWait
from mcp_runtime.tasks._wire import (
    LEGACY_TASKS_VERSION,
    TASK_VERSIONS,
    TASKS_EXTENSION,
    ListTasksParams,
    TaskIdParams,
    UpdateTaskParams,
    is_modern,
)
from runtime_core.tasks import TaskService, TaskTerminalError

Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[dict[str, Any]]]


class TaskMethods:
    def __init__(self, tasks: TaskService, guard: ToolGuard) -> None:
        self.tasks = tasks
        self.guard = guard
        self._wait = OutcomeWait(tasks, guard)

    def bindings(self) -> list[MethodBinding]:
        legacy, modern = frozenset({LEGACY_TASKS_VERSION}), frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskIdParams, _guarded(self.get), TASK_VERSIONS),
            MethodBinding("tasks/cancel", TaskIdParams, _guarded(self.cancel), TASK_VERSIONS),
            MethodBinding("tasks/update", UpdateTaskParams, _guarded(self.update), modern),
            MethodBinding("tasks/result", TaskIdParams, _guarded(self.result), legacy),
            MethodBinding("tasks/list", ListTasksParams, _guarded(self.list), legacy),
        ]

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        view = await self.tasks.get(params.task_id, caller_snapshot(self.guard, ctx))
        return modern_detailed_task(view) if is_modern(ctx.protocol_version) else legacy_task_result(view)

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        snapshot = caller_snapshot(self.guard, ctx)
        if not is_modern(ctx.protocol_version):
            return legacy_task_result(await self.tasks.cancel(params.task_id, snapshot))
        try:
            await self.tasks.cancel(params.task_id, snapshot)
        except TaskTerminalError:
            pass  # 2026-07-28: cancellation is an acknowledged request; the outcome stands
        return {}

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        snapshot = caller_snapshot(self.guard, ctx)
        await self.tasks.answer(params.task_id, _accepted_answers(params.input_responses), snapshot)
        return {}

    async def result(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        snapshot = caller_snapshot(self.guard, ctx)
        return legacy_payload(await self._wait.outcome(params.task_id, snapshot, ctx))

    async def list(self, ctx: ServerRequestContext[Any, Any], params: ListTasksParams) -> dict[str, Any]:
        page = await self.tasks.list(caller_snapshot(self.guard, ctx), params.cursor)
        listed: dict[str, Any] = {"tasks": [legacy_task(view) for view in page.tasks]}
        if page.next_cursor is not None:
            listed["nextCursor"] = page.next_cursor
        return listed


def _guarded(handler: Handler) -> Handler:
    """2026-07-28 requests must declare the extension (-32021); failures become `[code]` errors."""

    async def call(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        if is_modern(ctx.protocol_version):
            require_client_extension(ctx, TASKS_EXTENSION)
        try:
            return await handler(ctx, params)
        except MCPError:
            raise
        except Exception as exc:
            raise protocol_error(ctx.method, exc) from exc

    return call


def _accepted_answers(responses: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The content of each accepted form elicitation, by key; declined, dismissed or other
    responses answer nothing (the task keeps waiting)."""
    accepted = {}
    for key, response in responses.items():
        try:
            answer = ElicitResult.model_validate(response, by_name=False)
        except ValidationError:
            continue
        if answer.action == "accept":
            accepted[key] = dict(answer.content or {})
    return accepted
