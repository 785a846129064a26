"""HotRows: a tenant's runs still in hot state as listing rows, in either direction.

Owns turning shared-run summaries into `RunListRow`s (the local status of a dispatched run,
and, for a running one, WaitingForInput or Paused when its execution is parked there, read in
one round trip per batch), walking the tenant's listing newest first (towards older pages) or
oldest first (towards newer pages) within a query's time bounds and filters, and the failing
step of a hot failed run (read from its execution). The tenant is always the caller's. Must
not change any state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

from runtime_core.dag import DagStore, failure_summary
from runtime_core.instances import RunExecutionIndex
from runtime_core.lifecycle._listing import ListingKey, RunListQuery, RunListRow, from_epoch_ms
from runtime_core.queueing import SharedRunStatus, SharedRunStore, SharedRunSummary

PARKED_STATUSES = ("WaitingForInput", "Paused")
"""A running run's execution parked in one of these shows it as its status."""


def matches(row: RunListRow, query: RunListQuery, *, ignore_status: bool = False) -> bool:
    wanted = (
        (query.shared_status, row.shared_status),
        (None if ignore_status else query.status, row.status),
        (query.pipeline, row.pipeline),
        (query.submitted_by, row.submitted_by),
    )
    return all(expected is None or expected == actual for expected, actual in wanted)


class HotRows:
    def __init__(self, runs: SharedRunStore, index: RunExecutionIndex, executions: DagStore) -> None:
        self.runs = runs
        self.index = index
        self.executions = executions

    async def walk(
        self, tenant_id: str, query: RunListQuery, after: ListingKey | None, *, newest_first: bool = True
    ) -> AsyncIterator[RunListRow]:
        """The tenant's hot runs inside the query's time bounds, strictly after `after` in the
        walking order (all statuses: the caller filters)."""
        start, stop_ms = _bounds(query, after, newest_first)
        summaries = self.runs.tenant_summaries(tenant_id, after=start, newest_first=newest_first)
        async for batch in summaries:
            for row in await self.rows_of(tenant_id, batch):
                at_ms = row.key[0]
                if stop_ms is not None and (at_ms < stop_ms if newest_first else at_ms >= stop_ms):
                    return
                yield row

    async def rows_of(self, tenant_id: str, batch: list[SharedRunSummary]) -> list[RunListRow]:
        locals_ = await self.index.get_many_local([s.local_run_id for s in batch if s.local_run_id])
        rows = []
        for summary in batch:
            if summary.tenant_id != tenant_id:
                continue  # never another tenant's run, whatever the listing key holds
            local = locals_.get(summary.local_run_id or "")
            status = summary.status.value
            if summary.status is SharedRunStatus.DISPATCHED and local is not None:
                status = local.status.value
            rows.append(
                RunListRow(
                    shared_run_id=summary.shared_run_id,
                    pipeline=summary.pipeline_name,
                    submitted_by=summary.submitted_by,
                    submit_mode=summary.submit_mode.value,
                    submitted_at=from_epoch_ms(summary.created_at_ms),
                    shared_status=summary.status.value,
                    status=status,
                    local_run_id=summary.local_run_id,
                    execution_id=local.execution_id if local else None,
                    failure_reason=(local.failure_reason if local else None) or summary.failure_reason,
                    started_at=_moment(local.started_at_ms if local else None),
                    ended_at=_moment(local.completed_at_ms if local else None),
                    archived=False,
                )
            )
        return await self._with_parked_statuses(rows)

    async def _with_parked_statuses(self, rows: list[RunListRow]) -> list[RunListRow]:
        running = [row.execution_id for row in rows if row.status == "Running" and row.execution_id]
        controls = await self.executions.control_statuses(running)
        return [
            row.model_copy(update={"status": controls[row.execution_id]})
            if row.execution_id in controls and controls[row.execution_id] in PARKED_STATUSES
            else row
            for row in rows
        ]

    async def explain_failures(self, rows: list[RunListRow]) -> list[RunListRow]:
        """Hot failed rows with the step that failed the run and its error (from the execution)."""
        explained = []
        for row in rows:
            if row.archived or row.status != "Failed" or row.execution_id is None:
                explained.append(row)
                continue
            execution = await self.executions.read_execution(row.execution_id)
            failed = execution.failed_step if execution is not None else None
            explained.append(
                row.model_copy(update={"failed_step": failed.name, "failure_reason": failure_summary(failed)})
                if failed is not None
                else row
            )
        return explained


def _moment(milliseconds: int | None) -> datetime | None:
    return from_epoch_ms(milliseconds) if milliseconds else None


def _bounds(
    query: RunListQuery, after: ListingKey | None, newest_first: bool
) -> tuple[ListingKey | None, int | None]:
    """Where the walk starts (strictly after) and the submitted-at ms it stops at."""
    before_ms, after_ms = query.before_ms(), query.after_ms()
    if newest_first:  # start below `submitted_before` (keys strictly below: earlier ms), stop under `after`
        bound = (before_ms, "") if before_ms is not None else None
        candidates = [key for key in (after, bound) if key is not None]
        return (min(candidates) if candidates else None), after_ms
    bound = (after_ms - 1, "\U0010ffff") if after_ms is not None else None  # keys from after_ms on
    candidates = [key for key in (after, bound) if key is not None]
    return (max(candidates) if candidates else None), before_ms
