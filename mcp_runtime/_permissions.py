"""Which permission each MCP tool needs.

Owns the permission vocabulary (`object:action` pairs matched by the casbin policy) and the
tool -> permission table. Must not decide anything: the casbin policy does.
"""

from __future__ import annotations

from enum import StrEnum


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
    INSTANCE_READ = "instance:read"
    SCHEDULE_READ = "schedule:read"
    SCHEDULE_CREATE = "schedule:create"
    SCHEDULE_CONTROL = "schedule:control"
    SCHEDULE_DELETE = "schedule:delete"
    SCHEDULE_TRIGGER = "schedule:trigger"

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
    "pipelines.list": Permission.PIPELINE_READ,
    "pipelines.validate": Permission.PIPELINE_READ,
    "steps.list": Permission.PIPELINE_READ,
    "schedules.create": Permission.SCHEDULE_CREATE,
    "schedules.list": Permission.SCHEDULE_READ,
    "schedules.get": Permission.SCHEDULE_READ,
    "schedules.pause": Permission.SCHEDULE_CONTROL,
    "schedules.resume": Permission.SCHEDULE_CONTROL,
    "schedules.delete": Permission.SCHEDULE_DELETE,
    "schedules.trigger": Permission.SCHEDULE_TRIGGER,
}
