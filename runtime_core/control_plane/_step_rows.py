"""The explaining part of a `run.status` view: the steps' summary and one page of step rows
with their last error and next retry, the input a waiting run expects, and the step that failed
a failed run.

Owns turning an execution's summary and a page of its StepViews (server times in ms), or an
archived run's rows, into those view models (datetimes) and the failure summary. Must not
read any store: the reader passes the summary, the page and the registry.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from runtime_core.control_plane._views import (
    RunStatusView,
    StepErrorView,
    StepPage,
    StepRow,
    WaitingInputView,
)
from runtime_core.dag import ExecutionSummary, StepView, failure_summary
from runtime_core.steps import ExecutorRegistry


def explain_execution(
    view: RunStatusView,
    summary: ExecutionSummary,
    rows: list[StepView],
    page: StepPage,
    executors: ExecutorRegistry,
) -> None:
    """Fill the steps' summary and page, the waiting input and (for a Failed execution) the
    failing step and its error."""
    view.steps_total = summary.steps_total
    view.step_counts = dict(summary.step_counts)
    view.steps = [row(step) for step in rows]
    view.next_steps_cursor = page.next_cursor(summary.steps_total)
    view.waiting_input = _waiting_input(summary, executors)
    view.waiting_key = view.waiting_input.key if view.waiting_input else None
    failed = summary.failed_step if summary.meta.status == "Failed" else None
    if failed is not None:
        view.failed_step = failed.name
        view.failed_step_row = row(failed)
        view.failure_reason = failure_summary(failed)


def page_archived_steps(view: RunStatusView, rows: list[StepRow], page: StepPage) -> None:
    """The steps' summary and page of a run whose rows all come from its archived record."""
    view.steps_total = len(rows)
    view.step_counts = dict(Counter(row.status for row in rows))
    view.steps = rows[page.cursor : None if page.size is None else page.cursor + page.size]
    view.next_steps_cursor = page.next_cursor(len(rows))
    view.failed_step_row = next((r for r in rows if r.name == view.failed_step), None)


def row(step: StepView) -> StepRow:
    error = step.last_error
    return StepRow(
        name=step.name,
        step_key=step.step_key,
        status=step.status,
        retry_count=step.retry_count,
        recovery_count=step.recovery_count,
        last_error=StepErrorView(
            code=error.code, message=error.message, reason=error.reason, at=_moment(error.at_ms)
        )
        if error
        else None,
        next_retry_at=_moment(step.next_retry_at_ms),
        started_at=_moment(step.claimed_at_ms),
    )


def _waiting_input(summary: ExecutionSummary, executors: ExecutorRegistry) -> WaitingInputView | None:
    waiting = summary.waiting
    if waiting is None:
        return None
    step_key = next((s.step_key for s in summary.meta.pipeline.steps if s.name == waiting.step), "")
    return WaitingInputView(
        key=waiting.key,
        step=waiting.step,
        prompt=waiting.prompt,
        expected_input=executors.expected_input(step_key, waiting.key),
        since=_moment(waiting.since_ms),
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _moment(milliseconds: int | None) -> datetime | None:
    """Exact to the millisecond (no float rounding), like the durable run record's times."""
    return None if milliseconds is None else _EPOCH + timedelta(milliseconds=milliseconds)
