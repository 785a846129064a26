"""The MCP wire vocabulary of Tasks in both protocol eras: identifiers, params and request models.

Owns the names (the 2026-07-28 extension `io.modelcontextprotocol/tasks`, the 2025-11-25
experimental feature's version and `_meta` keys), which tools may run as tasks and which
field of their answer names the run a task follows, the params models the task methods are
validated against, and the request / result models a client sends and receives (`tasks/get`,
`tasks/update`, `tasks/cancel`, the `resultType: "task"` handle). Must not contain behaviour.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp_types import PaginatedRequestParams, Request, RequestParams, Result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-07-28 Tasks extension (SEP-2663)."""

LEGACY_TASKS_VERSION = "2025-11-25"
"""The only handshake-era version with the experimental Tasks feature."""

TASK_VERSIONS = frozenset({LEGACY_TASKS_VERSION, *MODERN_PROTOCOL_VERSIONS})
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
MODEL_IMMEDIATE_RESPONSE_META_KEY = "io.modelcontextprotocol/model-immediate-response"
RUN_META_KEY = "mcp-runtime/run"
"""`_meta` key of a task answer naming the tool and the run it follows (`{"tool", "runId"}`),
so a client can also read the run with `run.status`, `ledger` or `trace`."""

TASK_TOOLS: dict[str, str] = {"submit": "shared_run_id", "replay": "execution_id"}
"""The tools that can run as tasks -> the field of their answer naming the run the task follows."""

RUN_FAILED = -32000
"""JSON-RPC code (server-defined range) of a failed task's `error`: its pipeline run failed."""

LEGACY_TASKS_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""`capabilities.tasks` of a 2025-11-25 `initialize` answer."""


def is_modern(protocol_version: str | None) -> bool:
    return protocol_version in MODERN_PROTOCOL_VERSIONS


class TaskIdParams(RequestParams):
    """`tasks/get`, `tasks/cancel`, `tasks/result`: `{"taskId": ...}`."""

    task_id: str


class UpdateTaskParams(TaskIdParams):
    """`tasks/update` (2026-07-28): answers keyed like the task's `inputRequests`."""

    input_responses: dict[str, Any]


class ListTasksParams(PaginatedRequestParams):
    """`tasks/list` (2025-11-25)."""


class GetTaskRequest(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # the 2026-07-28 transport routes task methods by `Mcp-Name: <taskId>`


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


class CancelTaskRequest(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class TaskHandle(Result):
    """A 2026-07-28 `CreateTaskResult` (`resultType: "task"`): the task a tool call became."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
