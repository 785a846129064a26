"""Which permission each MCP tool, task method and resource needs.

Owns the permission vocabulary (`object:action` pairs matched by the casbin policy), the
tool -> permission table, the task and subscription methods' permissions, and the permission a
JSON-RPC request needs (read before the server runs it, so an OAuth token lacking the scope is
answered 403 with the scope to ask for). Must not decide anything: the casbin policy does.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Permission(StrEnum):
    PIPELINE_READ = "pipeline:read"
    RUN_READ = "run:read"
    AUDIT_READ = "audit:read"
    RUN_SUBMIT = "run:submit"
    QUEUE_DRAIN = "queue:drain"
    RUN_CANCEL = "run:cancel"
    RUN_CONTROL = "run:control"
    RUN_INPUT = "run:input"
    RUN_REPLAY = "run:replay"
    RUN_RETRY = "run:retry"
    INSTANCE_READ = "instance:read"
    SCHEDULE_READ = "schedule:read"
    SCHEDULE_CREATE = "schedule:create"
    SCHEDULE_CONTROL = "schedule:control"
    SCHEDULE_DELETE = "schedule:delete"
    SCHEDULE_TRIGGER = "schedule:trigger"
    CAPACITY_READ = "capacity:read"

    @property
    def object(self) -> str:
        return self.value.split(":", 1)[0]

    @property
    def action(self) -> str:
        return self.value.split(":", 1)[1]


TOOL_PERMISSIONS: dict[str, Permission] = {
    "submit": Permission.RUN_SUBMIT,
    "queue.drain": Permission.QUEUE_DRAIN,
    "instances.list": Permission.INSTANCE_READ,
    "capacity.list": Permission.CAPACITY_READ,
    "run.status": Permission.RUN_READ,
    "runs.list": Permission.RUN_READ,
    "cancel": Permission.RUN_CANCEL,
    "pause": Permission.RUN_CONTROL,
    "resume": Permission.RUN_CONTROL,
    "input.submit": Permission.RUN_INPUT,
    "replay": Permission.RUN_REPLAY,
    "ledger": Permission.AUDIT_READ,
    "trace": Permission.AUDIT_READ,
    "forensics": Permission.AUDIT_READ,
    "recovery.report": Permission.AUDIT_READ,
    "pipelines.list": Permission.PIPELINE_READ,
    "pipelines.validate": Permission.PIPELINE_READ,
    "steps.list": Permission.PIPELINE_READ,
    "runs.failed": Permission.RUN_READ,
    "runs.retry": Permission.RUN_RETRY,
    "runs.cancel": Permission.RUN_CANCEL,
    "schedules.create": Permission.SCHEDULE_CREATE,
    "schedules.list": Permission.SCHEDULE_READ,
    "schedules.get": Permission.SCHEDULE_READ,
    "schedules.pause": Permission.SCHEDULE_CONTROL,
    "schedules.resume": Permission.SCHEDULE_CONTROL,
    "schedules.delete": Permission.SCHEDULE_DELETE,
    "schedules.trigger": Permission.SCHEDULE_TRIGGER,
}

METHOD_PERMISSIONS: dict[str, Permission] = {
    # Reading a task is reading its run, cancelling it is cancelling the run, answering it is input.
    "tasks/get": Permission.RUN_READ,
    "tasks/result": Permission.RUN_READ,
    "tasks/list": Permission.RUN_READ,
    "tasks/cancel": Permission.RUN_CANCEL,
    "tasks/update": Permission.RUN_INPUT,
    "resources/subscribe": Permission.RUN_READ,
    "subscriptions/listen": Permission.RUN_READ,
}
RESOURCE_PERMISSIONS: dict[str, Permission] = {
    # by URI scheme: run://<id>, ui://run-view/<id>, pipeline://<name>, step://<key>
    "run": Permission.RUN_READ,
    "ui": Permission.RUN_READ,
    "pipeline": Permission.PIPELINE_READ,
    "step": Permission.PIPELINE_READ,
}


def request_permission(message: Mapping[str, Any]) -> Permission | None:
    """The permission a JSON-RPC request needs, when it names one (None for anything else)."""
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, Mapping) else {}
    if method == "tools/call":
        return TOOL_PERMISSIONS.get(str(params.get("name")))
    if method == "resources/read":
        return RESOURCE_PERMISSIONS.get(str(params.get("uri", "")).partition("://")[0])
    return METHOD_PERMISSIONS.get(str(method))
