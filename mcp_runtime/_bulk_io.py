"""Input and output models of `runs.failed`, `runs.retry` and `runs.cancel`.

Owns the filter arguments every bulk tool shares (run ids, or pipeline / user / submit-time
window) and the per-run answers. Must not contain behaviour beyond argument validation.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from mcp_runtime._inputs import ID_PATTERN, MAX_ID_LENGTH, NAME_PATTERN, ToolInput
from mcp_runtime._outputs import ToolOutput
from runtime_core.bulk_actions import FailedRun, RunActionResult

MAX_LISTED_IDS = 1000


class RunFilterInput(ToolInput):
    run_ids: list[str] | None = Field(
        None,
        max_length=MAX_LISTED_IDS,
        description="These runs (any run ids of your tenant). Give either run_ids or filter fields.",
    )
    pipeline: str | None = Field(
        None, max_length=MAX_ID_LENGTH, pattern=NAME_PATTERN, description="Runs of this pipeline name."
    )
    submitted_by: str | None = Field(
        None, max_length=MAX_ID_LENGTH, pattern=NAME_PATTERN, description="Runs submitted by this user id."
    )
    submitted_after: datetime | None = Field(
        None, description="Runs submitted at or after this time (ISO 8601; UTC when no offset is given)."
    )
    submitted_before: datetime | None = Field(
        None, description="Runs submitted before this time (ISO 8601; UTC when no offset is given)."
    )

    def run_ids_checked(self) -> tuple[str, ...]:
        for run_id in self.run_ids or ():
            if not run_id or len(run_id) > MAX_ID_LENGTH or any(c <= " " or c > "~" for c in run_id):
                raise ValueError(f"run id {run_id!r} is not a run id (printable ASCII, no spaces)")
        return tuple(self.run_ids or ())


class FailedRunsInput(RunFilterInput):
    limit: int = Field(20, ge=1, le=200, description="At most this many failed runs (1-200), newest first.")
    cursor: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description="`next_cursor` of the previous page, to continue with older failed runs.",
    )


class FailedRunsOutput(ToolOutput):
    tenant_id: str
    runs: list[FailedRun]
    next_cursor: str | None = Field(None, description="Pass it back as `cursor` for older failed runs.")


class BulkActionOutput(ToolOutput):
    tenant_id: str
    runs: list[RunActionResult] = Field(description="What the call did to each run it covered.")
    counts: dict[str, int] = Field(description="How many runs had each outcome.")
