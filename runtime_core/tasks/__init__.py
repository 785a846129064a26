"""Tasks: a long-running tool call (a pipeline run, a replay) followed as a task in Redis.

Owns the task record of each task (tenant, creator, tool, run followed, TTL, pinned status)
under its own hash tag, with `lua/task_create.lua` and `lua/task_transition.lua` as its only
writers; the tenant's task index for listings; and `TaskService`, which maps a run to a task
status (working, input_required, completed, failed, cancelled), cancels a task's run and
answers its input request. Any control-plane process answers for any task. Must not know
MCP: the MCP wire forms of tasks live in `mcp_runtime.tasks`.
"""

from runtime_core.tasks._errors import InvalidTaskCursorError, TaskNotFoundError, TaskTerminalError
from runtime_core.tasks._models import (
    InputRequest,
    TaskFailure,
    TaskPage,
    TaskRecord,
    TaskSettings,
    TaskStatus,
    TaskView,
)
from runtime_core.tasks._service import TaskService
from runtime_core.tasks._store import TaskKeys, TaskStore, TaskTransition, TransitionOutcome

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Service
    "TaskService",
    "TaskSettings",
    # Task state
    "TaskStatus",
    "TaskRecord",
    "TaskView",
    "TaskPage",
    "InputRequest",
    "TaskFailure",
    # Store
    "TaskStore",
    "TaskKeys",
    "TaskTransition",
    "TransitionOutcome",
    # Errors
    "TaskNotFoundError",
    "TaskTerminalError",
    "InvalidTaskCursorError",
]
