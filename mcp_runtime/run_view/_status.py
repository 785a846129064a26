"""How a status is shown: colour (a CSS class) AND text (a label with a glyph), never colour alone.

Owns the table of statuses of steps and runs the views show, the status a step is shown
with (the step that parked for human input shows as waiting for input; after the run ended,
a step that never ran shows as Not run, not Pending), the one status a run is shown with
(a running run parked on its gate or paused shows that), and the fallback for a status the
table does not know. Must not decide any status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WAITING_FOR_INPUT = "WaitingForInput"
NOT_RUN = "NotRun"
PARKED_RUN_STATUSES = ("WaitingForInput", "Paused")
FINISHED_STEP_STATUSES = frozenset({"Completed", "Failed", "Cancelled"})


@dataclass(frozen=True)
class StatusStyle:
    status: str
    label: str
    glyph: str
    tone: str
    """The colour family (a CSS class suffix): neutral, active, waiting, attention, success, failure."""

    @property
    def css_class(self) -> str:
        return f"tone-{self.tone}"

    @property
    def text(self) -> str:
        return f"{self.glyph} {self.label}"


_STYLES = [
    StatusStyle("Pending", "Pending", "○", "neutral"),
    StatusStyle("Ready", "Ready", "○", "neutral"),
    StatusStyle("Submitted", "Submitted", "○", "neutral"),
    StatusStyle("QueuedGlobally", "Queued globally", "○", "neutral"),
    StatusStyle("Queued", "Queued", "○", "neutral"),
    StatusStyle("ScaleOutRequested", "Scale-out requested", "○", "waiting"),
    StatusStyle("Dispatched", "Dispatched", "▶", "active"),
    StatusStyle("Running", "Running", "▶", "active"),
    StatusStyle("Resuming", "Resuming", "▶", "active"),
    StatusStyle("WaitingForRetry", "Waiting for retry", "↻", "waiting"),
    StatusStyle("Pausing", "Pausing", "‖", "waiting"),
    StatusStyle("Paused", "Paused", "‖", "waiting"),
    StatusStyle(WAITING_FOR_INPUT, "Waiting for input", "✎", "attention"),
    StatusStyle("Cancelling", "Cancelling", "■", "waiting"),
    StatusStyle("Completed", "Completed", "✓", "success"),
    StatusStyle("Failed", "Failed", "✗", "failure"),
    StatusStyle("Rejected", "Rejected", "✗", "failure"),
    StatusStyle("Cancelled", "Cancelled", "■", "neutral"),
    StatusStyle(NOT_RUN, "Not run", "\u2013", "neutral"),  # an en dash
]
STATUS_STYLES: dict[str, StatusStyle] = {style.status: style for style in _STYLES}
STEP_LEGEND = [
    STATUS_STYLES[s]
    for s in ("Pending", "Running", "WaitingForRetry", WAITING_FOR_INPUT, "Completed", "Failed", NOT_RUN)
]


def status_style(status: str | None) -> StatusStyle:
    """The style of a status; an unknown one is shown as its own words, in the neutral colour."""
    if status is None:
        return StatusStyle("Unknown", "Unknown", "?", "neutral")
    known = STATUS_STYLES.get(status)
    if known is not None:
        return known
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", status)
    return StatusStyle(status, words[:1].upper() + words[1:].lower(), "•", "neutral")


def shown_step_status(status: str, step_name: str, waiting_step: str | None, run_done: bool = False) -> str:
    """The step the execution waits on for human input (parked: handed back Ready) shows as
    waiting; once the run is done, a step that did not finish never will: Not run."""
    if run_done and status not in FINISHED_STEP_STATUSES:
        return NOT_RUN
    if waiting_step == step_name and status in ("Ready", "Running"):
        return WAITING_FOR_INPUT
    return status


def shown_run_status(final_status: str, control_status: str | None, done: bool) -> str:
    """One status for a run: its most advanced identity's, or, while it runs, the control
    status it is parked in (WaitingForInput, Paused)."""
    if not done and control_status in PARKED_RUN_STATUSES:
        return control_status
    return final_status
