"""Dead letters: the caller's tenant's runs that failed after their retries, explained.

Owns `FailedRunReader`: the failed runs of a filter, newest first, each with the step that
failed it, that step's last error and its attempts (from the ledger: every
`step.retry_scheduled` and the final `step.failed`), and the run that retried it, if any (the
`shared_run.retried` ledger entry `runs.retry` writes). Must not change any state.
"""

from __future__ import annotations

from runtime_core.audit import AuditQueries
from runtime_core.bulk_actions._models import FailedRun, RunFilter, StepAttempt
from runtime_core.bulk_actions._selection import listing_query
from runtime_core.control_plane import ControlPlane, RunStatusView, run_final_status, run_is_done
from runtime_core.errors import NotFoundError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import RunListRow
from runtime_core.storage import LedgerEntry

FAILED = "Failed"
RETRIED_EVENT = "shared_run.retried"
RETRY_RUN_ATTRIBUTE = "retry.run_id"
_ATTEMPT_EVENTS = {"step.retry_scheduled": True, "step.failed": False}


def _attempts(ledger: list[LedgerEntry], step: str | None) -> list[StepAttempt]:
    rows = [entry for entry in ledger if entry.event in _ATTEMPT_EVENTS and entry.step_name == step]
    return [
        StepAttempt(
            at=entry.recorded_at,
            attempt=n,
            code=str(entry.attributes.get("code", "")),
            message=str(entry.attributes.get("error", "")),
            retry_scheduled=_ATTEMPT_EVENTS[entry.event],
        )
        for n, entry in enumerate(rows, start=1)
    ]


def failed_for_good(view: RunStatusView) -> bool:
    """Finished, and failed (after its retries)."""
    return run_is_done(view) and run_final_status(view) == FAILED


def retried_by(ledger: list[LedgerEntry]) -> str | None:
    return next((str(e.attributes[RETRY_RUN_ATTRIBUTE]) for e in ledger if e.event == RETRIED_EVENT), None)


class FailedRunReader:
    def __init__(self, control_plane: ControlPlane, audit: AuditQueries) -> None:
        self._control_plane = control_plane
        self._audit = audit

    async def list(
        self,
        caller: ExecutionContextSnapshot,
        run_filter: RunFilter,
        *,
        limit: int,
        cursor: str | None = None,
    ) -> tuple[list[FailedRun], str | None]:
        """One page of failed runs (newest first; listed ids in their order) and the next cursor."""
        if run_filter.by_ids:
            found = []
            for run_id in run_filter.run_ids:
                view = await self.failed_view(caller, run_id)
                if view is not None:
                    found.append(await self._explain(caller, view, None))
            return found, None
        page = await self._control_plane.list_runs(listing_query(run_filter, FAILED, limit, cursor), caller)
        explained = [
            await self._explain(caller, await self._control_plane.run_status(row.shared_run_id, caller), row)
            for row in page.runs
        ]
        return explained, page.next_cursor

    async def failed_view(self, caller: ExecutionContextSnapshot, run_id: str) -> RunStatusView | None:
        """The run's status when it is the caller's tenant's and failed for good; else None."""
        try:
            view = await self._control_plane.run_status(run_id, caller)
        except NotFoundError:
            return None
        return view if failed_for_good(view) else None

    async def _explain(
        self, caller: ExecutionContextSnapshot, view: RunStatusView, row: RunListRow | None
    ) -> FailedRun:
        shared_run_id = view.shared_run_id or view.requested_id
        ledger = await self._audit.ledger(caller, shared_run_id=shared_run_id)
        failed = view.failed_step_row
        return FailedRun(
            shared_run_id=shared_run_id,
            execution_id=view.execution_id,
            pipeline=row.pipeline if row else None,
            submitted_by=row.submitted_by if row else None,
            submitted_at=row.submitted_at if row else None,
            ended_at=row.ended_at if row else None,
            failure_reason=view.failure_reason or (row.failure_reason if row else None),
            failed_step=view.failed_step,
            last_error=failed.last_error if failed else None,
            retry_count=failed.retry_count if failed else 0,
            attempts=_attempts(ledger, view.failed_step),
            retried_by=retried_by(ledger),
        )
