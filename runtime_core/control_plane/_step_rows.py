"""The explaining part of a `run.status` view: step rows with their last error and next retry,
the input a waiting run expects, and the step that failed a failed run.

Owns turning an ExecutionView (server times in ms) into those view models (datetimes) and
the failure summary. Must not read any store: the reader passes the execution and registry.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from runtime_core.control_plane._views import RunStatusView, StepErrorView, StepRow, WaitingInputView
from runtime_core.dag import ExecutionView, StepView, failure_summary
from runtime_core.steps import ExecutorRegistry


def explain_execution(view: RunStatusView, execution: ExecutionView, executors: ExecutorRegistry) -> None:
    """Fill the step rows, the waiting input and (for a Failed execution) the failing step."""
    view.steps = [_row(step) for step in execution.steps]
    view.waiting_input = _waiting_input(execution, executors)
    view.waiting_key = view.waiting_input.key if view.waiting_input else None
    failed = execution.failed_step if execution.meta.status == "Failed" else None
    if failed is not None:
        view.failed_step = failed.name
        view.failure_reason = failure_summary(failed)


def _row(step: StepView) -> StepRow:
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


def _waiting_input(execution: ExecutionView, executors: ExecutorRegistry) -> WaitingInputView | None:
    waiting = execution.waiting
    if waiting is None:
        return None
    keys = {step.name: step.step_key for step in execution.steps}
    return WaitingInputView(
        key=waiting.key,
        step=waiting.step,
        prompt=waiting.prompt,
        expected_input=executors.expected_input(keys.get(waiting.step or "", ""), waiting.key),
        since=_moment(waiting.since_ms),
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _moment(milliseconds: int | None) -> datetime | None:
    """Exact to the millisecond (no float rounding), like the durable run record's times."""
    return None if milliseconds is None else _EPOCH + timedelta(milliseconds=milliseconds)
