"""What `mcp-runtime run` and `mcp-runtime input` print about an execution once it stops.

Owns the text a user reads: the step table, the final result, why a run failed (the step
that failed it, then each failed or retrying step's last error: code, message, why it stopped
retrying, retries, when, next retry; `failure_lines` is the one place that describes a
failure), and, for an execution parked on a human-input gate, the input it expects and the
command that answers it. Must not run or change anything.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime_core.control import ControlState
from runtime_core.dag import ExecutionView, StepView, failure_summary

WAITING_FOR_INPUT = "WaitingForInput"


@dataclass(frozen=True)
class AnswerContext:
    """How the user reached this execution: repeated in the command that answers it."""

    data_dir: Path
    tenant: str
    user: str
    defaults: tuple[str, str]  # the CLI's default (tenant, user)
    providers_file: Path | None = None


def step_table(view: ExecutionView, waiting_step: str | None = None) -> str:
    """One row per step; the step a parked run waits on reads WaitingForInput (the DAG keeps it
    Ready: it runs again once answered)."""
    rows = [("step", "stepKey", "status", "retries", "recoveries")]
    rows += [
        (
            s.name,
            s.step_key,
            _shown_status(s.name, s.status, waiting_step),
            str(s.retry_count),
            str(s.recovery_count),
        )
        for s in view.steps
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def _shown_status(step: str, status: str, waiting_step: str | None) -> str:
    return WAITING_FOR_INPUT if step == waiting_step and status == "Ready" else status


def failure_lines(view: ExecutionView) -> list[str]:
    """The step that failed the run, then one line per failed or retrying step's last error."""
    lines = []
    failed = view.failed_step if view.meta.status == "Failed" else None
    if failed is not None:
        lines.append(f"Failed: {failure_summary(failed)}")
    explained = [_failure_line(step) for step in view.steps if step.status in ("Failed", "WaitingForRetry")]
    if explained:
        lines += ["Failed or retrying steps:", *explained]
    return lines


def _failure_line(step: StepView) -> str:
    error = step.last_error
    if error is None:
        return f"  {step.name} ({step.step_key}, {step.status}): no error was recorded"
    line = f"  {step.name} ({step.step_key}, {step.status}): [{error.code}] {error.message}"
    if error.reason:
        line += f" -- {error.reason}"
    retry = f", next retry at {_clock(step.next_retry_at_ms)}" if step.next_retry_at_ms else ""
    return f"{line} (retries {step.retry_count}, failed at {_clock(error.at_ms)}{retry})"


def _clock(milliseconds: int | None) -> str:
    if milliseconds is None:
        return "an unknown time"
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _result_text(title: str, result: Any) -> str:
    return f"\n{title}:\n{json.dumps(result, indent=2, sort_keys=True)}"


def answer_command(view: ExecutionView, control: ControlState, context: AnswerContext) -> str:
    """The `mcp-runtime input ...` line that answers the gate and runs the execution on."""
    command = ["mcp-runtime", "input", view.meta.execution_id, control.waiting_key or "<waiting-key>"]
    command += ["--payload", json.dumps({"approved": True}), "--data-dir", str(context.data_dir.resolve())]
    if (context.tenant, context.user) != context.defaults:
        command += ["--tenant", context.tenant, "--user", context.user]
    if context.providers_file is not None:
        command += ["--providers-file", str(context.providers_file.resolve())]
    return shlex.join(command)


def outcome_report(
    view: ExecutionView,
    status: str,
    control: ControlState | None,
    context: AnswerContext,
    expected_input: dict[str, Any] | None = None,
    *,
    every_step: bool = False,
) -> str:
    """Everything printed on stdout once the execution stopped (terminal or parked);
    `expected_input` is the JSON schema of the answer a parked step waits for; `every_step`:
    the result of every step that has one (`--steps-output`), not only the final one."""
    waiting_step = control.waiting_step if status == WAITING_FOR_INPUT and control is not None else None
    parts = [f"ExecutionId: {view.meta.execution_id}\nStatus: {status}\n", step_table(view, waiting_step)]
    if every_step:
        shown = [step for step in view.steps if step.result is not None]
        parts += [_result_text(f"Result of {step.name} ({step.step_key})", step.result) for step in shown]
    elif status == "Completed":
        final = view.steps[-1]
        parts.append(_result_text(f"Final result ({final.name})", final.result))
    elif status == WAITING_FOR_INPUT and control is not None:
        step = control.waiting_step or "?"
        prompt = f": {control.reason}" if control.reason else ""
        expected = f"Expected input: {json.dumps(expected_input, sort_keys=True)}\n" if expected_input else ""
        parts.append(
            f"\nStep '{step}' waits for input under key '{control.waiting_key}'{prompt}\n{expected}"
            "Answer it (the payload is yours to choose) and run the execution on with:\n"
            f"  {answer_command(view, control, context)}"
        )
    failures = failure_lines(view)
    if failures:
        parts.append("\n" + "\n".join(failures))
    return "\n".join(parts)
