"""MCP Tasks in both protocol eras over the runtime's Redis-backed task service.

Owns the MCP wiring of `runtime_core.tasks`: the 2026-07-28 extension
`io.modelcontextprotocol/tasks` (an SDK `Extension`: `tasks/get`, `tasks/update`,
`tasks/cancel` and a `tools/call` interceptor answering `resultType: "task"`), the
2025-11-25 experimental Tasks (capability `tasks`, `tools/call` with a `task` parameter,
`execution.taskSupport`, `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`; a
server middleware where the SDK has no other hook), the wire shapes of both, and a client
extension that follows tasks for SDK clients. `submit` and `replay` run as tasks. Must not
contain task behaviour: the TaskService maps runs to task statuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.context import ServerMiddleware
from mcp.server.extension import Extension

from mcp_runtime._guard import ToolGuard
from mcp_runtime.tasks._client import (
    TaskInputHandler,
    TasksClientExtension,
    cancel_task,
    follow_task,
    get_task,
    update_task,
)
from mcp_runtime.tasks._creation import TaskCreator
from mcp_runtime.tasks._extension import TasksExtension, answered_as_task
from mcp_runtime.tasks._legacy import LegacyTasksMiddleware
from mcp_runtime.tasks._methods import TaskMethods
from mcp_runtime.tasks._wire import (
    LEGACY_TASKS_VERSION,
    RELATED_TASK_META_KEY,
    RUN_FAILED,
    RUN_META_KEY,
    TASK_TOOLS,
    TASKS_EXTENSION,
    CancelTaskRequest,
    GetTaskRequest,
    TaskHandle,
    UpdateTaskRequest,
)
from runtime_core.tasks import TaskService


@dataclass(frozen=True)
class TaskSupport:
    """What `MCPServer(...)` takes to serve Tasks: its extensions and its middleware."""

    extensions: list[Extension]
    middleware: list[ServerMiddleware]


def task_support(tasks: TaskService, guard: ToolGuard) -> TaskSupport:
    return TaskSupport(
        extensions=[TasksExtension(tasks, guard)],
        middleware=[LegacyTasksMiddleware(TaskCreator(tasks, guard))],
    )


__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Server
    "task_support",
    "TaskSupport",
    "TasksExtension",
    "answered_as_task",
    "LegacyTasksMiddleware",
    "TaskMethods",
    "TaskCreator",
    # Wire vocabulary
    "TASKS_EXTENSION",
    "LEGACY_TASKS_VERSION",
    "RELATED_TASK_META_KEY",
    "RUN_FAILED",
    "RUN_META_KEY",
    "TASK_TOOLS",
    "GetTaskRequest",
    "UpdateTaskRequest",
    "CancelTaskRequest",
    "TaskHandle",
    # Client
    "TasksClientExtension",
    "TaskInputHandler",
    "follow_task",
    "get_task",
    "update_task",
    "cancel_task",
]
