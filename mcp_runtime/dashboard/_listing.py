"""The runs list's data access: the one place that knows which runtime_core query lists runs.

Owns the listing filters (those of the `runs.list` tool: shared status, overall status,
pipeline, submitting user, submission window, page size, cursor), the row a list shows and
the query behind it. Until `runs.list` lands in runtime_core this reads the tenant's shared
run listing in hot state (newest INTERIM_SCAN runs, filtered here, one page); switching to
`ControlPlane.list_runs` changes this module only. The permission is the listing tool's
(`run:read`). Must not render or authorize.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime_core.control_plane import ControlPlane
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import RunExecutionIndex
from runtime_core.queueing import SharedRunRecord

LISTING_TOOL = "run.status"
"""The tool whose permission the list needs (`runs.list` once it exists: the same `run:read`)."""
INTERIM_SCAN = 200


def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class RunFilters(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    shared_status: str | None = None
    status: str | None = None
    pipeline: str | None = None
    submitted_by: str | None = None
    submitted_after: datetime | None = None
    submitted_before: datetime | None = None
    limit: int = Field(20, ge=1, le=200)
    cursor: str | None = None

    _aware = field_validator("submitted_after", "submitted_before")(_utc)

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value


class RunRow(BaseModel):
    shared_run_id: str
    pipeline: str
    submitted_by: str
    submit_mode: str
    submitted_at: datetime
    shared_status: str
    status: str
    local_run_id: str | None = None
    execution_id: str | None = None
    failure_reason: str | None = None
    ended_at: datetime | None = None


class RunPage(BaseModel):
    tenant_id: str
    runs: list[RunRow]
    next_cursor: str | None = None


def _matches(row: RunRow, filters: RunFilters) -> bool:
    wanted = (
        (filters.shared_status, row.shared_status),
        (filters.status, row.status),
        (filters.pipeline, row.pipeline),
        (filters.submitted_by, row.submitted_by),
    )
    if any(expected is not None and expected != actual for expected, actual in wanted):
        return False
    after, before = filters.submitted_after, filters.submitted_before
    return (after is None or row.submitted_at >= after) and (before is None or row.submitted_at < before)


def _from_ms(milliseconds: int | None) -> datetime | None:
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC) if milliseconds else None


async def _row(index: RunExecutionIndex, record: SharedRunRecord) -> RunRow:
    local = await index.get_by_shared(record.shared_run_id)
    status = local.status.value if local is not None else record.status.value
    return RunRow(
        shared_run_id=record.shared_run_id,
        pipeline=record.pipeline.name,
        submitted_by=record.snapshot.user_id if record.snapshot else "",
        submit_mode=record.submit_mode.value,
        submitted_at=_from_ms(record.created_at_ms) or datetime.fromtimestamp(0, tz=UTC),
        shared_status=record.status.value,
        status=status,
        local_run_id=local.local_run_id if local else None,
        execution_id=local.execution_id if local else None,
        failure_reason=(local.failure_reason if local else None) or record.failure_reason,
        ended_at=_from_ms(local.completed_at_ms) if local else None,
    )


async def list_runs(
    control_plane: ControlPlane, filters: RunFilters, snapshot: ExecutionContextSnapshot
) -> RunPage:
    """The caller's tenant's runs, newest first, filtered (the tenant is the snapshot's, always)."""
    parts = control_plane.parts
    records = await parts.runs.list_tenant(snapshot.tenant_id, limit=INTERIM_SCAN)
    rows = [await _row(parts.index, record) for record in records if record.tenant_id == snapshot.tenant_id]
    matching = [row for row in rows if _matches(row, filters)]
    return RunPage(tenant_id=snapshot.tenant_id, runs=matching[: filters.limit])
