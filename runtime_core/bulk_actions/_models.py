"""Shapes of dead letters and bulk actions: the run filter, a failed run with its retry history,
what an action did to each run, and the per-call limit. Must not hold behaviour."""

from __future__ import annotations

import os
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.control_plane import StepErrorView

DEFAULT_MAX_RUNS_PER_CALL = 100


class BulkSettings(BaseModel):
    """`max_runs_per_call`: a bulk action whose filter matches more runs is refused whole."""

    max_runs_per_call: int = Field(default=DEFAULT_MAX_RUNS_PER_CALL, ge=1, le=10_000)

    @classmethod
    def from_env(cls) -> BulkSettings:
        value = os.environ.get("MCP_RUNTIME_BULK_MAX_RUNS")
        return cls.model_validate({"max_runs_per_call": value} if value else {})


class RunFilter(BaseModel):
    """Which of the caller's tenant's runs an action covers: the listed `run_ids`, or every run
    matching all the given fields (at least one field must be given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_ids: tuple[str, ...] = ()
    pipeline: str | None = None
    submitted_by: str | None = None
    submitted_after: datetime | None = None
    submitted_before: datetime | None = None

    @property
    def by_ids(self) -> bool:
        return bool(self.run_ids)

    @property
    def empty(self) -> bool:
        return not self.run_ids and all(
            value is None
            for value in (self.pipeline, self.submitted_by, self.submitted_after, self.submitted_before)
        )


class StepAttempt(BaseModel):
    """One failed attempt of the step that failed the run, from the ledger."""

    at: datetime
    attempt: int = Field(description="1 for the first attempt.")
    code: str
    message: str
    retry_scheduled: bool = Field(description="True when a retry followed; False for the last attempt.")


class FailedRun(BaseModel):
    shared_run_id: str
    execution_id: str | None
    pipeline: str | None = Field(description="None when the run was asked for by id.")
    submitted_by: str | None
    submitted_at: datetime | None
    ended_at: datetime | None
    failure_reason: str | None
    failed_step: str | None
    last_error: StepErrorView | None
    retry_count: int
    attempts: list[StepAttempt]
    retried_by: str | None = Field(None, description="The run that retried this one, if any (runs.retry).")


class ActionOutcome(StrEnum):
    RETRIED = "retried"
    ALREADY_RETRIED = "already_retried"
    CANCELLED = "cancelled"
    ALREADY_FINISHED = "already_finished"
    BUSY = "busy"  # still being dispatched after the wait: nothing changed, repeat the call
    NOT_FAILED = "not_failed"
    NOT_FINISHED = "not_finished"
    NOT_RETRYABLE = "not_retryable"
    NOT_FOUND = "not_found"


class RunActionResult(BaseModel):
    """What one bulk action did to one run; `new_run_id` is a retry's run."""

    shared_run_id: str
    outcome: ActionOutcome
    detail: str = ""
    new_run_id: str | None = None
