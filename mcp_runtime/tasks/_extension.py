"""The `io.modelcontextprotocol/tasks` extension: task methods, and `submit` / `replay` as tasks.

Owns what the SDK's Extension hook carries: the task methods of both eras (MethodBindings,
see `_methods`) and the `tools/call` interceptor of the 2026-07-28 era, where the server
decides: a `submit` or `replay` call whose request declares the extension runs the tool,
then answers a task (`resultType: "task"`) following the run the tool started; any other
call, an error result, or a client without the extension gets today's answer unchanged.
Must not contain task behaviour.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp_types import CallToolRequestParams, CallToolResult, ClientCapabilities

from mcp_runtime._guard import ToolGuard
from mcp_runtime.tasks._creation import TaskCreator
from mcp_runtime.tasks._methods import TaskMethods
from mcp_runtime.tasks._shapes import modern_create_result
from mcp_runtime.tasks._wire import LEGACY_TASKS_VERSION, TASK_TOOLS, TASKS_EXTENSION, is_modern
from runtime_core.tasks import TaskService

_DECLARES_TASKS = ClientCapabilities(extensions={TASKS_EXTENSION: {}})


class TasksExtension(Extension):
    identifier = TASKS_EXTENSION

    def __init__(self, tasks: TaskService, guard: ToolGuard) -> None:
        self._methods = TaskMethods(tasks, guard)
        self._creator = TaskCreator(tasks, guard)

    def methods(self) -> list[MethodBinding]:
        return self._methods.bindings()

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if not _runs_as_task(params, ctx) or not isinstance(result, CallToolResult):
            return result
        if result.is_error or not isinstance(result.structured_content, dict):
            return result
        view = await self._creator.create(params.name, result.structured_content, ctx)
        return modern_create_result(view)


def _runs_as_task(params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any]) -> bool:
    return params.name in TASK_TOOLS and is_modern(ctx.protocol_version) and _declares_tasks(ctx)


def _declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.session.check_client_capability(_DECLARES_TASKS)


def answered_as_task(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this `tools/call` of a task tool will be answered with a task, in either era
    (2026-07-28: the client declares the extension; 2025-11-25: the call has a `task`)."""
    if is_modern(ctx.protocol_version):
        return _declares_tasks(ctx)
    return ctx.protocol_version == LEGACY_TASKS_VERSION and (ctx.params or {}).get("task") is not None
