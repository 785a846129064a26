"""Errors and retry history per step, from the run's ledger and trace spans.

Owns grouping, per step, its attempts (one trace span each: worker, outcome, duration,
error code) and the ledger events that explain a failure, a retry or a recovery (code and
message as recorded). Pure: no I/O, no rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from runtime_core.storage import LedgerEntry, TraceSpan

# Ledger events that explain why a step did not simply complete.
TROUBLE_EVENTS = frozenset(
    {"step.failed", "step.retry_scheduled", "step.recovered", "step.executor_error", "step.park_refused"}
)


@dataclass(frozen=True)
class StepAttempt:
    number: int
    worker_id: str
    outcome: str
    duration_ms: float
    error_code: str | None


@dataclass(frozen=True)
class StepEvent:
    at: datetime
    event: str
    code: str | None
    message: str | None


@dataclass
class StepHistory:
    attempts: list[StepAttempt] = field(default_factory=list)
    events: list[StepEvent] = field(default_factory=list)


def step_histories(ledger: Sequence[LedgerEntry], spans: Sequence[TraceSpan]) -> dict[str, StepHistory]:
    histories: dict[str, StepHistory] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        if span.step_name is None:
            continue
        history = histories.setdefault(span.step_name, StepHistory())
        history.attempts.append(
            StepAttempt(
                number=len(history.attempts) + 1,
                worker_id=str(span.attributes.get("mcprt.worker_id") or ""),
                outcome=str(span.attributes.get("mcprt.outcome") or span.status),
                duration_ms=round((span.end_ns - span.start_ns) / 1e6, 3),
                error_code=_text(span.attributes.get("mcprt.error.code")),
            )
        )
    for entry in ledger:
        if entry.step_name is None or entry.event not in TROUBLE_EVENTS:
            continue
        histories.setdefault(entry.step_name, StepHistory()).events.append(
            StepEvent(
                at=entry.recorded_at,
                event=entry.event,
                code=_text(entry.attributes.get("code")),
                message=_text(entry.attributes.get("error") or entry.attributes.get("reason")),
            )
        )
    return histories


def _text(value: object) -> str | None:
    return None if value is None else str(value)
