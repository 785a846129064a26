"""Why an execution stopped or waits, read from its hot state: step errors and input waits.

Owns the typed last error of a step (code, message, retry reason and server time, as
`fail_step.lua` records it), the human-input wait of an execution (key, step, prompt), and
choosing the step that failed a run (the earliest recorded failure) with a one-line summary.
Must not read Redis: DagStore.read_execution fills the views these work on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar


@dataclass(frozen=True)
class StepError:
    """The last failure recorded for a step; kept after a later successful retry."""

    code: str
    message: str
    reason: str = ""
    at_ms: int | None = None

    @classmethod
    def parse(cls, recorded: Any) -> StepError | None:
        if not isinstance(recorded, dict):
            return None
        at_ms = recorded.get("at_ms")
        return cls(
            code=str(recorded.get("code") or "step_failed"),
            message=str(recorded.get("message") or ""),
            reason=str(recorded.get("reason") or ""),
            at_ms=int(at_ms) if isinstance(at_ms, int | float) and not isinstance(at_ms, bool) else None,
        )


@dataclass(frozen=True)
class WaitingInput:
    """An execution parked for human input: answer under `key` (step `step` asked, with `prompt`)."""

    key: str
    step: str | None
    prompt: str
    since_ms: int | None = None  # when the execution parked (its control state's last change)


class _ExplainedStep(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def step_key(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def last_error(self) -> StepError | None: ...


StepT = TypeVar("StepT", bound=_ExplainedStep)


def failing_step(steps: Sequence[StepT]) -> StepT | None:
    """The Failed step whose failure came first (pipeline order breaks ties and unknown times)."""
    failed = [(index, step) for index, step in enumerate(steps) if step.status == "Failed"]
    if not failed:
        return None

    def first(entry: tuple[int, StepT]) -> tuple[int, int]:
        error = entry[1].last_error
        return (error.at_ms if error and error.at_ms is not None else 2**63, entry[0])

    return min(failed, key=first)[1]


def failure_summary(step: _ExplainedStep) -> str:
    """`step 'x' (key) failed: [code] message`."""
    error = step.last_error
    detail = f"[{error.code}] {error.message}" if error else "no error was recorded"
    return f"step '{step.name}' ({step.step_key}) failed: {detail}"
