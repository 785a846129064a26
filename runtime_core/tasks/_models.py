"""Task vocabulary: statuses, the stored task record, the derived task view and its settings.

Owns `TaskStatus`, `TaskRecord` (what Redis holds about one task), `TaskView` (a record plus
what its run says now: status, message, the input it waits for, the failure), `TaskPage`
and `TaskSettings`. Must not read or write Redis, nor know any MCP wire format.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.control_plane import RunStatusView


class TaskStatus(StrEnum):
    """A task's lifecycle: working <-> input_required, then one terminal status for good."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})


class TaskRecord(BaseModel):
    """One task as stored: who created it (tenant, user), which tool and run it follows, the
    tool's own answer at creation (`origin`), its timestamps (Redis server time) and TTL."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    tenant_id: str
    user_id: str
    tool: str
    run_id: str
    origin: dict[str, Any]
    status: TaskStatus = TaskStatus.WORKING
    created_at_ms: int = 0
    last_updated_at_ms: int = 0
    ttl_ms: int
    poll_interval_ms: int

    def fields(self) -> dict[str, str]:
        """The Redis hash fields a new record is written with (status and timestamps are the
        creating script's: it reads the server clock)."""
        return {
            "task_id": self.task_id,
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "tool": self.tool,
            "run_id": self.run_id,
            "origin": json.dumps(self.origin, sort_keys=True, separators=(",", ":")),
            "ttl_ms": str(self.ttl_ms),
            "poll_interval_ms": str(self.poll_interval_ms),
        }

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> TaskRecord:
        return cls(
            task_id=fields["task_id"],
            tenant_id=fields["tenant_id"],
            user_id=fields["user_id"],
            tool=fields["tool"],
            run_id=fields["run_id"],
            origin=json.loads(fields["origin"]),
            status=TaskStatus(fields["status"]),
            created_at_ms=int(fields["created_at_ms"]),
            last_updated_at_ms=int(fields["last_updated_at_ms"]),
            ttl_ms=int(fields["ttl_ms"]),
            poll_interval_ms=int(fields["poll_interval_ms"]),
        )


class InputRequest(BaseModel):
    """What a task waiting for human input needs: answer it under `key` with an object that
    matches `input_schema` (the waiting step's own schema)."""

    model_config = ConfigDict(frozen=True)

    key: str
    execution_id: str
    waiting_step: str | None
    prompt: str
    input_schema: dict[str, Any]


class TaskFailure(BaseModel):
    """Why a task failed: the failing step's error code and message (or the run's reason)."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    step: str | None = None


class TaskView(BaseModel):
    """A task as its caller sees it now: the record, and the status its run maps to."""

    model_config = ConfigDict(frozen=True)

    record: TaskRecord
    status: TaskStatus
    last_updated_at_ms: int
    status_message: str
    run: RunStatusView | None = None
    input_request: InputRequest | None = None
    failure: TaskFailure | None = None


class TaskPage(BaseModel):
    model_config = ConfigDict(frozen=True)

    tasks: list[TaskView]
    next_cursor: str | None = None


class TaskSettings(BaseModel):
    """TTL bounds (a requested TTL is clamped to them), the suggested poll interval and the
    page size of task listings."""

    model_config = ConfigDict(frozen=True)

    default_ttl_ms: int = Field(default=3_600_000, ge=1_000)
    min_ttl_ms: int = Field(default=1_000, ge=1)
    max_ttl_ms: int = Field(default=86_400_000, ge=1_000)
    poll_interval_ms: int = Field(default=1_000, ge=10)
    page_size: int = Field(default=20, ge=1, le=100)

    def ttl_for(self, requested_ms: int | None) -> int:
        wanted = self.default_ttl_ms if requested_ms is None else requested_ms
        return max(self.min_ttl_ms, min(self.max_ttl_ms, wanted))

    @classmethod
    def from_env(cls) -> TaskSettings:
        env = {
            "default_ttl_ms": os.environ.get("MCP_RUNTIME_TASK_TTL_MS"),
            "max_ttl_ms": os.environ.get("MCP_RUNTIME_TASK_MAX_TTL_MS"),
            "poll_interval_ms": os.environ.get("MCP_RUNTIME_TASK_POLL_INTERVAL_MS"),
        }
        return cls.model_validate({key: value for key, value in env.items() if value})
