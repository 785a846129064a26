"""Typed errors of the task service, each telling the caller what to do next."""

from __future__ import annotations

from runtime_core.errors import ConflictError, NotFoundError, RuntimeCoreError
from runtime_core.tasks._models import TaskStatus


class TaskNotFoundError(NotFoundError):
    """Unknown, expired, or another tenant's task: the same answer for all three."""

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"Task '{task_id}' not found.",
            hint="Task ids are valid for their TTL and only within the tenant that created them; "
            "start a new task by calling the tool again.",
        )


class TaskTerminalError(ConflictError):
    """The task already reached a terminal status; nothing can change it any more."""

    def __init__(self, task_id: str, status: TaskStatus) -> None:
        super().__init__(
            f"Task '{task_id}' is already in terminal status '{status.value}'.",
            hint="Read its outcome with tasks/get (or tasks/result).",
        )
        self.status = status


class InvalidTaskCursorError(RuntimeCoreError):
    code = "invalid_cursor"

    def __init__(self) -> None:
        super().__init__(
            "The cursor is not one this server issued.",
            hint="Pass the nextCursor of a previous tasks/list answer unchanged, or omit it.",
        )
