"""The 2025-11-25 experimental Tasks where the SDK gives no hook but its server middleware.

The SDK (mcp 2.3) has no legacy Tasks support and leaves three gaps this middleware fills:
- `initialize`: `Server.get_capabilities` (mcp/server/lowlevel/server.py) never derives
  `capabilities.tasks`, so a 2025-11-25 answer gets `tasks` {list, cancel,
  requests.tools.call} added here;
- `tools/list`: `MCPServer.list_tools` (mcp/server/mcpserver/server.py) builds tools without
  `execution`, so `submit` and `replay` get `execution.taskSupport: "optional"` here;
- `tools/call` with a `task` parameter: `ServerRunner._serialize` (mcp/server/runner.py)
  sieves every `tools/call` result through the era's `CallToolResult`, so neither the tool
  handler nor an Extension interceptor can answer a `CreateTaskResult` (`{"task": ...}`)
  at 2025-11-25. The middleware runs the call (its `call_next`), then answers the task
  itself: a middleware that answers without the runner's serialization is the SDK's
  documented way to own a result's shape.
A `task` parameter on a tool that cannot run as a task is -32601, as the specification
says; a failed call (an error result) is answered as is, no task is created. Only the
2025-11-25 era is touched. Must not contain task behaviour.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, TaskMetadata

from mcp_runtime.tasks._creation import TaskCreator
from mcp_runtime.tasks._shapes import legacy_create_result
from mcp_runtime.tasks._wire import LEGACY_TASKS_CAPABILITY, LEGACY_TASKS_VERSION, TASK_TOOLS


class LegacyTasksMiddleware:
    """A `Server.middleware` entry: `(ctx, call_next) -> result`."""

    def __init__(self, creator: TaskCreator) -> None:
        self._creator = creator

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize":
            return _with_tasks_capability(await call_next(ctx))
        if ctx.protocol_version != LEGACY_TASKS_VERSION:
            return await call_next(ctx)
        if ctx.method == "tools/list":
            return _with_task_support(await call_next(ctx))
        params = ctx.params or {}
        if ctx.method == "tools/call" and params.get("task") is not None:
            return await self._call_as_task(ctx, call_next, params)
        return await call_next(ctx)

    async def _call_as_task(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, params: Any
    ) -> HandlerResult:
        tool = params.get("name")
        if tool not in TASK_TOOLS:
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"[task_not_supported] Tool {tool!r} cannot run as a task (its "
                "execution.taskSupport is forbidden). Next: call it without the `task` parameter; "
                f"{', '.join(sorted(TASK_TOOLS))} can run as tasks.",
            )
        metadata = TaskMetadata.model_validate(params["task"], by_name=False)
        result = await call_next(ctx)
        answer = result.get("structuredContent") if isinstance(result, dict) else None
        if not isinstance(result, dict) or result.get("isError") or not isinstance(answer, dict):
            return result
        view = await self._creator.create(tool, answer, ctx, requested_ttl_ms=metadata.ttl)
        return legacy_create_result(view)


def _with_tasks_capability(result: HandlerResult) -> HandlerResult:
    if isinstance(result, dict) and result.get("protocolVersion") == LEGACY_TASKS_VERSION:
        capabilities = result.get("capabilities") or {}
        return {**result, "capabilities": {**capabilities, "tasks": LEGACY_TASKS_CAPABILITY}}
    return result


def _with_task_support(result: HandlerResult) -> HandlerResult:
    if not isinstance(result, dict):
        return result
    tools = [
        {**tool, "execution": {"taskSupport": "optional"}} if tool.get("name") in TASK_TOOLS else tool
        for tool in result.get("tools", [])
    ]
    return {**result, "tools": tools}
