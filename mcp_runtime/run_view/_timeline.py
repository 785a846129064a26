"""The step timeline (a Gantt chart) of an execution, from its stored trace spans.

Owns turning spans into rows (the execution first, then each step attempt by start time),
each with its offset and duration from the execution's start, the bar geometry on a chart
of fixed width, and the time axis ticks. Pure: no I/O, no rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcp_runtime.run_view._humanize import duration_text
from runtime_core.storage import TraceSpan

CHART_WIDTH = 640
LABEL_WIDTH = 200
ROW_HEIGHT = 22
AXIS_HEIGHT = 24
MAX_ROWS = 300
PARKED_OUTCOME = "step.parked"
_TICKS = 5


@dataclass(frozen=True)
class TimelineRow:
    label: str
    step_name: str | None
    start_ms: float
    duration_ms: float
    ok: bool
    outcome: str
    x: float
    width: float
    y: int

    @property
    def kind(self) -> str:
        """The bar's colour class: the whole run, a completed attempt, a parked one, a failed one."""
        if self.step_name is None:
            return "run"
        if self.outcome == PARKED_OUTCOME:
            return "parked"
        return "ok" if self.ok else "error"


@dataclass(frozen=True)
class TimelineTick:
    x: float
    label: str


@dataclass(frozen=True)
class Timeline:
    rows: list[TimelineRow]
    ticks: list[TimelineTick]
    total_ms: float
    width: int
    height: int
    omitted: int
    """Step attempts left out beyond MAX_ROWS (the ledger still lists them)."""


def build_timeline(spans: Sequence[TraceSpan]) -> Timeline:
    ordered = sorted(spans, key=lambda span: (span.step_name is not None, span.start_ns, span.span_id))
    shown = ordered[:MAX_ROWS]
    origin = min((span.start_ns for span in spans), default=0)
    end = max((span.end_ns for span in spans), default=0)
    total_ms = max((end - origin) / 1e6, 0.001)
    scale = CHART_WIDTH / total_ms
    attempts: dict[str, int] = {}
    rows = []
    for index, span in enumerate(shown):
        start_ms = (span.start_ns - origin) / 1e6
        duration_ms = (span.end_ns - span.start_ns) / 1e6
        rows.append(
            TimelineRow(
                label=_label(span, attempts),
                step_name=span.step_name,
                start_ms=round(start_ms, 3),
                duration_ms=round(duration_ms, 3),
                ok=span.status == "OK",
                outcome=str(span.attributes.get("mcprt.outcome") or span.status),
                x=LABEL_WIDTH + start_ms * scale,
                width=max(duration_ms * scale, 2.0),
                y=AXIS_HEIGHT + index * ROW_HEIGHT,
            )
        )
    return Timeline(
        rows=rows,
        ticks=_ticks(total_ms, scale),
        total_ms=round(total_ms, 3),
        width=LABEL_WIDTH + CHART_WIDTH + 8,
        height=AXIS_HEIGHT + len(rows) * ROW_HEIGHT + 4,
        omitted=len(ordered) - len(shown),
    )


def _label(span: TraceSpan, attempts: dict[str, int]) -> str:
    if span.step_name is None:
        return f"{span.name} (whole run)"
    attempts[span.step_name] = attempts.get(span.step_name, 0) + 1
    return f"{span.step_name} #{attempts[span.step_name]}"


def _ticks(total_ms: float, scale: float) -> list[TimelineTick]:
    every_ms = total_ms / _TICKS
    return [
        TimelineTick(x=LABEL_WIDTH + n * every_ms * scale, label=duration_text(n * every_ms / 1000))
        for n in range(_TICKS + 1)
    ]
