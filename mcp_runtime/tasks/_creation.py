"""Turning a successful `submit` / `replay` answer into a task, in either protocol era.

Owns taking the tool's structured answer, finding the run it started (TASK_TOOLS), and
creating the task as the calling principal (the tool itself already authorized the call).
Must not run the tool: the era-specific hooks call it first and hand its answer here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import ServerRequestContext

from mcp_runtime._errors import protocol_error
from mcp_runtime._guard import ToolGuard
from mcp_runtime.tasks._wire import TASK_TOOLS
from runtime_core.tasks import TaskService, TaskView


class TaskCreator:
    def __init__(self, tasks: TaskService, guard: ToolGuard) -> None:
        self.tasks = tasks
        self.guard = guard

    async def create(
        self,
        tool: str,
        answer: Mapping[str, Any],
        ctx: ServerRequestContext[Any, Any],
        *,
        requested_ttl_ms: int | None = None,
    ) -> TaskView:
        """The task following the run `answer` names; durable before this returns."""
        try:
            principal = self.guard.principals.current(ctx)
            snapshot = principal.snapshot(context_key=f"mcp:{tool}:task:{ctx.request_id}")
            return await self.tasks.create(
                tool, str(answer[TASK_TOOLS[tool]]), dict(answer), snapshot, requested_ttl_ms=requested_ttl_ms
            )
        except Exception as exc:
            raise protocol_error("tools/call", exc) from exc
