"""A TaskView in each era's wire shape, and the tool result a finished task stands for.

Owns the 2025-11-25 `Task` (`ttl`, `pollInterval`) and `CreateTaskResult` (`{"task": ...}`),
the 2026-07-28 task (`ttlMs`, `pollIntervalMs`; `resultType: "task"` on creation) with its
status payload (`inputRequests` as form elicitations, `result`, `error`), and the
`CallToolResult` of a finished task: the tool's own answer at creation plus the run's final
`run.status` (`run`) when completed, an error result when it failed or was cancelled.
Must not look anything up: the TaskService did.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcp_types import CallToolResult, TextContent
from mcp_types import methods as wire_methods
from pydantic import BaseModel

from mcp_runtime._outputs import ReplayOutput, SubmitOutput
from mcp_runtime._run_answers import run_status_output
from mcp_runtime.tasks._wire import (
    LEGACY_TASKS_VERSION,
    MODEL_IMMEDIATE_RESPONSE_META_KEY,
    RELATED_TASK_META_KEY,
    RUN_FAILED,
    RUN_META_KEY,
)
from runtime_core.tasks import InputRequest, TaskStatus, TaskView

_OUTPUT_MODELS: dict[str, type[BaseModel]] = {"submit": SubmitOutput, "replay": ReplayOutput}


def _iso(milliseconds: int) -> str:
    moment = datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _common(view: TaskView) -> dict[str, Any]:
    return {
        "taskId": view.record.task_id,
        "status": view.status.value,
        "statusMessage": view.status_message,
        "createdAt": _iso(view.record.created_at_ms),
        "lastUpdatedAt": _iso(view.last_updated_at_ms),
    }


def _run_meta(view: TaskView) -> dict[str, Any]:
    return {RUN_META_KEY: {"tool": view.record.tool, "runId": view.record.run_id}}


# 2025-11-25


def legacy_task(view: TaskView) -> dict[str, Any]:
    return {**_common(view), "ttl": view.record.ttl_ms, "pollInterval": view.record.poll_interval_ms}


def legacy_task_result(view: TaskView) -> dict[str, Any]:
    """`tasks/get` / `tasks/cancel`: the task, with the run it follows in `_meta`."""
    return {**legacy_task(view), "_meta": _run_meta(view)}


def legacy_create_result(view: TaskView) -> dict[str, Any]:
    immediate = (
        f"Started task {view.record.task_id} ({view.record.tool}); poll tasks/get, then read tasks/result."
    )
    meta = {MODEL_IMMEDIATE_RESPONSE_META_KEY: immediate, **_run_meta(view)}
    return {"task": legacy_task(view), "_meta": meta}


def legacy_payload(view: TaskView) -> dict[str, Any]:
    """`tasks/result` of a terminal task: exactly the tool result, tagged with its task."""
    dumped = tool_result(view).model_dump(by_alias=True, mode="json", exclude_none=True)
    shaped = wire_methods.serialize_server_result("tools/call", LEGACY_TASKS_VERSION, dumped)
    return {**shaped, "_meta": {RELATED_TASK_META_KEY: {"taskId": view.record.task_id}}}


# 2026-07-28


def modern_task(view: TaskView) -> dict[str, Any]:
    return {**_common(view), "ttlMs": view.record.ttl_ms, "pollIntervalMs": view.record.poll_interval_ms}


def modern_create_result(view: TaskView) -> dict[str, Any]:
    return {"resultType": "task", **modern_task(view), "_meta": _run_meta(view)}


def modern_detailed_task(view: TaskView) -> dict[str, Any]:
    """`tasks/get`: the task plus what its status carries (input requests, result or error)."""
    detailed = {"resultType": "complete", **modern_task(view), "_meta": _run_meta(view)}
    if view.status is TaskStatus.INPUT_REQUIRED and view.input_request is not None:
        detailed["inputRequests"] = input_requests(view.input_request)
    elif view.status is TaskStatus.COMPLETED:
        detailed["result"] = tool_result(view).model_dump(by_alias=True, mode="json", exclude_none=True)
    elif view.status is TaskStatus.FAILED:
        detailed["error"] = failure_error(view)
    return detailed


def input_requests(request: InputRequest) -> dict[str, Any]:
    """The waiting step's question as a form elicitation, keyed by its waiting key."""
    params = {"mode": "form", "message": input_message(request), "requestedSchema": request.input_schema}
    return {request.key: {"method": "elicitation/create", "params": params}}


def input_message(request: InputRequest) -> str:
    """What the person asked reads: the step's prompt, else which step waits under which key."""
    return request.prompt or f"Input for step '{request.waiting_step}' (waiting key '{request.key}')."


def failure_error(view: TaskView) -> dict[str, Any]:
    failure = view.failure
    data = {"runId": view.record.run_id}
    if failure is not None:
        data |= {"code": failure.code, "step": failure.step, "message": failure.message}
    return {"code": RUN_FAILED, "message": view.status_message, "data": data}


# The tool result a task stands for


def tool_result(view: TaskView) -> CallToolResult:
    """Completed: the tool's answer at creation with the run's final `run.status` as `run`;
    failed or cancelled: an error result whose text starts with the `[code]`."""
    if view.status is not TaskStatus.COMPLETED or view.run is None:
        code = view.failure.code if view.failure is not None else view.status.value
        text = (
            view.status_message if view.status_message.startswith("[") else f"[{code}] {view.status_message}"
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    finished = {**view.record.origin, "run": run_status_output(view.run).model_dump(mode="json")}
    if "next_step" in finished:  # the answer at creation said how to follow the run: it is over now
        finished["next_step"] = "The run finished: `run` is its final run.status; see also `ledger`, `trace`."
    answer = _OUTPUT_MODELS[view.record.tool].model_validate(finished)
    return CallToolResult(
        content=[TextContent(type="text", text=answer.model_dump_json(indent=2))],
        structured_content=answer.model_dump(mode="json"),
    )
