"""Bulk actions on the caller's tenant's runs: retry failed runs, cancel runs, by ids or filter.

Owns `BulkRunActions`. A retry submits a new run with the original's pipeline, input and
priority, acting for the caller, with the snapshot attribute `retry.of`; its idempotency key
`retry:<original>` makes a repeated retry return the same new run (`already_retried`). "Run
again" does the same for a run that finished any way, once per request key. The
original's ledger gets a `shared_run.retried` entry naming the new run (one per original: its
entry id is fixed), the new run's `shared_run.submitted` entry carries `retry.of`. A cancel is
the `cancel` tool's, per run. Every call answers what it did to each run, and is refused
whole (nothing done) when more than the per-call limit of runs match. Must not bypass the
ControlPlane: every run is looked up tenant-checked.
"""

from __future__ import annotations

from typing import Any

from runtime_core.audit import AuditQueries, ExecutionDocument, LedgerRecorder
from runtime_core.bulk_actions._failed import (
    FAILED,
    RETRIED_EVENT,
    RETRY_RUN_ATTRIBUTE,
    FailedRunReader,
    failed_for_good,
)
from runtime_core.bulk_actions._models import ActionOutcome, BulkSettings, RunActionResult, RunFilter
from runtime_core.bulk_actions._selection import TooManyRunsError, matching_runs
from runtime_core.control_plane import (
    TERMINAL_RUN_STATUSES,
    ControlPlane,
    RunStatusView,
    run_final_status,
    run_is_done,
)
from runtime_core.errors import ConflictError, NotFoundError, RunBusyError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.storage import LedgerEntry

RETRY_OF_ATTRIBUTE = "retry.of"


def retry_key(shared_run_id: str) -> str:
    return f"retry:{shared_run_id}"


def _not_found(run_id: str) -> RunActionResult:
    return RunActionResult(
        shared_run_id=run_id, outcome=ActionOutcome.NOT_FOUND, detail="no such run in your tenant"
    )


class BulkRunActions:
    def __init__(
        self,
        control_plane: ControlPlane,
        audit: AuditQueries,
        ledger: LedgerRecorder | None,
        settings: BulkSettings,
    ) -> None:
        self._control_plane = control_plane
        self._audit = audit
        self._ledger = ledger
        self.settings = settings
        self.failed = FailedRunReader(control_plane, audit)

    def _check_ids(self, run_filter: RunFilter, what: str) -> None:
        if len(run_filter.run_ids) > self.settings.max_runs_per_call:
            raise TooManyRunsError(self.settings.max_runs_per_call, what)

    # Retry

    async def retry(self, caller: ExecutionContextSnapshot, run_filter: RunFilter) -> list[RunActionResult]:
        if run_filter.by_ids:
            self._check_ids(run_filter, "retry")
            return [await self._retry_id(caller, run_id) for run_id in run_filter.run_ids]
        rows = await matching_runs(
            self._control_plane,
            caller,
            run_filter,
            status=FAILED,
            keep=lambda row: True,
            limit=self.settings.max_runs_per_call,
            what="retry",
        )
        return [await self._retry_id(caller, row.shared_run_id) for row in rows]

    async def _retry_id(self, caller: ExecutionContextSnapshot, run_id: str) -> RunActionResult:
        try:
            view = await self._control_plane.run_status(run_id, caller)
        except NotFoundError:
            return _not_found(run_id)
        shared_run_id = view.shared_run_id or run_id
        if not failed_for_good(view):
            return RunActionResult(
                shared_run_id=shared_run_id,
                outcome=ActionOutcome.NOT_FAILED,
                detail=f"status {run_final_status(view)}: only runs that failed for good are retried",
            )
        return await self._resubmit(caller, view, retry_key(shared_run_id), f"led_retry_{shared_run_id}")

    async def run_again(
        self, caller: ExecutionContextSnapshot, run_id: str, request_key: str
    ) -> RunActionResult:
        """A new run of a finished run (any ending: completed, failed, cancelled), linked to it like a
        retry; `request_key` names this request (a repeat of it answers the same new run)."""
        try:
            view = await self._control_plane.run_status(run_id, caller)
        except NotFoundError:
            return _not_found(run_id)
        shared_run_id = view.shared_run_id or run_id
        if not run_is_done(view):
            status = run_final_status(view)
            return RunActionResult(
                shared_run_id=shared_run_id,
                outcome=ActionOutcome.NOT_FINISHED,
                detail=f"status {status}: a run is run again once it finished",
            )
        return await self._resubmit(caller, view, f"again:{shared_run_id}:{request_key}")

    async def _resubmit(
        self,
        caller: ExecutionContextSnapshot,
        view: RunStatusView,
        idempotency_key: str,
        link_id: str | None = None,
    ) -> RunActionResult:
        """Submit the run's pipeline and input again for the caller, linked both ways."""
        shared_run_id = view.shared_run_id or view.requested_id
        request = await self._request_of(caller, view)
        if request is None:
            detail = "its pipeline and input are no longer stored (the run and its snapshot expired)"
            return RunActionResult(
                shared_run_id=shared_run_id, outcome=ActionOutcome.NOT_RETRYABLE, detail=detail
            )
        pipeline, input, priority = request
        result = await self._control_plane.submit(
            pipeline,
            input,
            None,
            caller.model_copy(update={"attributes": {RETRY_OF_ATTRIBUTE: shared_run_id}}),
            idempotency_key=idempotency_key,
            priority=priority,
        )
        await self._link(
            caller, shared_run_id, result.shared_run_id, link_id or f"led_again_{result.shared_run_id}"
        )
        outcome = ActionOutcome.ALREADY_RETRIED if result.deduplicated else ActionOutcome.RETRIED
        return RunActionResult(
            shared_run_id=shared_run_id,
            outcome=outcome,
            detail=f"new run {result.shared_run_id} ({result.status.value})",
            new_run_id=result.shared_run_id,
        )

    async def _request_of(
        self, caller: ExecutionContextSnapshot, view: RunStatusView
    ) -> tuple[PipelineDefinition, dict[str, Any], int | None] | None:
        """The original's pipeline, input and priority: from its shared run record while Redis
        keeps it, else from its execution's terminal snapshot (default priority)."""
        record = await self._control_plane.parts.runs.get(view.shared_run_id or "")
        if record is not None and record.tenant_id == caller.tenant_id:
            return record.pipeline, record.input, record.priority
        if view.execution_id is None:
            return None
        terminal = await self._audit.terminal_snapshot(caller, view.execution_id)
        if terminal is None:
            return None
        document = ExecutionDocument.model_validate(terminal.snapshot)
        return parse_pipeline(document.pipeline), document.state, None

    async def _link(
        self, caller: ExecutionContextSnapshot, original: str, new_run_id: str, entry_id: str
    ) -> None:
        """The original's ledger names its new run (the new run's names the original itself);
        `entry_id` fixed per request, so a repeated request writes it once."""
        if self._ledger is None:
            return
        entry = LedgerEntry(
            entry_id=entry_id,
            tenant_id=caller.tenant_id,
            shared_run_id=original,
            event=RETRIED_EVENT,
            attributes={RETRY_RUN_ATTRIBUTE: new_run_id, "user.id": caller.user_id},
        )
        await self._ledger.append(entry, flush=True)

    # Cancel

    async def cancel(self, caller: ExecutionContextSnapshot, run_filter: RunFilter) -> list[RunActionResult]:
        if run_filter.by_ids:
            self._check_ids(run_filter, "cancel")
            return [await self._cancel_id(caller, run_id) for run_id in run_filter.run_ids]
        rows = await matching_runs(
            self._control_plane,
            caller,
            run_filter,
            status=None,
            keep=lambda row: row.status not in TERMINAL_RUN_STATUSES,
            limit=self.settings.max_runs_per_call,
            what="cancel",
        )
        return [await self._cancel_id(caller, row.shared_run_id) for row in rows]

    async def _cancel_id(self, caller: ExecutionContextSnapshot, run_id: str) -> RunActionResult:
        try:
            result = await self._control_plane.cancel(run_id, caller, reason="bulk cancel (runs.cancel)")
        except NotFoundError:
            return _not_found(run_id)
        except RunBusyError as exc:
            return RunActionResult(shared_run_id=run_id, outcome=ActionOutcome.BUSY, detail=exc.message)
        except ConflictError as exc:
            return RunActionResult(
                shared_run_id=run_id, outcome=ActionOutcome.ALREADY_FINISHED, detail=exc.message
            )
        return RunActionResult(
            shared_run_id=result.shared_run_id or run_id,
            outcome=ActionOutcome.CANCELLED,
            detail=result.message,
        )
