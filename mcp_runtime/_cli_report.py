"""What `mcp-runtime run` and `mcp-runtime input` print about an execution once it stops.

Owns the text a user reads: the step table, the final result, each failed step's error
(`failure_lines`, the one place that describes a failure: it grows with what ExecutionView
offers), and, for an execution parked on a human-input gate, the command that answers it.
Must not run or change anything.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_core.control import ControlState
from runtime_core.dag import ExecutionView, StepView

WAITING_FOR_INPUT = "WaitingForInput"


@dataclass(frozen=True)
class AnswerContext:
    """How the user reached this execution: repeated in the command that answers it."""

    data_dir: Path
    tenant: str
    user: str
    defaults: tuple[str, str]  # the CLI's default (tenant, user)
    providers_file: Path | None = None


def step_table(view: ExecutionView) -> str:
    rows = [("step", "stepKey", "status", "retries", "recoveries")]
    rows += [(s.name, s.step_key, s.status, str(s.retry_count), str(s.recovery_count)) for s in view.steps]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def failure_lines(view: ExecutionView) -> list[str]:
    """One line per failed step: name, stepKey, error code and message (and why it stopped retrying)."""
    return [_failure_line(step) for step in view.steps if step.status == "Failed"]


def _failure_line(step: StepView) -> str:
    error: dict[str, Any] = step.error if isinstance(step.error, dict) else {"message": str(step.error)}
    code = error.get("code") or "error"
    line = f"  {step.name} ({step.step_key}): [{code}] {error.get('message', '(no message)')}"
    if error.get("reason"):
        line += f" -- {error['reason']}"
    if step.retry_count:
        line += f" (after {step.retry_count} {'retry' if step.retry_count == 1 else 'retries'})"
    return line


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
    view: ExecutionView, status: str, control: ControlState | None, context: AnswerContext
) -> str:
    """Everything printed on stdout once the execution stopped (terminal or parked)."""
    parts = [f"ExecutionId: {view.meta.execution_id}\nStatus: {status}\n", step_table(view)]
    if status == "Completed":
        final = view.steps[-1]
        parts.append(f"\nFinal result ({final.name}):\n{json.dumps(final.result, indent=2, sort_keys=True)}")
    elif status == WAITING_FOR_INPUT and control is not None:
        step = control.waiting_step or "?"
        prompt = f": {control.reason}" if control.reason else ""
        parts.append(
            f"\nStep '{step}' waits for input under key '{control.waiting_key}'{prompt}\n"
            "Answer it (the payload is yours to choose) and run the execution on with:\n"
            f"  {answer_command(view, control, context)}"
        )
    failures = failure_lines(view)
    if failures:
        parts.append("\nFailed steps:\n" + "\n".join(failures))
    return "\n".join(parts)
