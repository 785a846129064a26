"""What the runs list shows: one status per run, times people read, the failing step, counts.

Owns turning a listing page (`runs.list`'s rows) and the tenant's counts per status into
the list page's rows and links: each run's one user-facing status (the shared status shown
only where it explains something: a run queued again after an attempt, a scale-out asked
for), submitted "3 min ago" (the exact time kept for a tooltip), how long it ran, waited or
has been running, the step that failed it with its error (secrets redacted), the status
counts as filter links, and the links to newer and older pages that keep the filters.
Must not read anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from mcp_runtime.dashboard._security import UI_PATH
from mcp_runtime.run_view import Redactor, StatusStyle, duration_text, status_style
from runtime_core.lifecycle import RunListPage, RunListRow, RunStatusCounts

LISTED_STATUSES = [
    "QueuedGlobally",
    "Queued",
    "Running",
    "WaitingForInput",
    "Paused",
    "Failed",
    "Completed",
    "Cancelled",
    "Rejected",
]
"""The status filter's choices, in the order a run goes through them."""
ERROR_CHARS = 240
_EXPLAINING_SHARED = {
    "QueuedGlobally": "queued again",
    "Submitted": "being submitted",
    "ScaleOutRequested": "waiting for new capacity",
    "Rejected": "rejected by admission",
}


@dataclass(frozen=True)
class RunRow:
    run: RunListRow
    style: StatusStyle
    shared_note: str | None
    timing: str
    """What its clock says: "12.3 s" once ended, "running" / "queued" while not."""
    timing_since: datetime | None
    """While unfinished: since when the timing counts (the page's script keeps it ticking)."""
    failure: str | None


@dataclass(frozen=True)
class StatusCount:
    status: str | None  # None: every status
    style: StatusStyle | None
    count: int
    url: str
    current: bool


def row_view(run: RunListRow, redactor: Redactor) -> RunRow:
    style = status_style(run.status)
    explains = run.shared_status != "Dispatched" and run.shared_status != run.status
    note = _EXPLAINING_SHARED.get(run.shared_status, run.shared_status) if explains else None
    failure = failure_text(run.failure_reason, run.failed_step, redactor)
    if run.ended_at is not None:
        begun = run.started_at or run.submitted_at
        return RunRow(run, style, note, duration_text((run.ended_at - begun).total_seconds()), None, failure)
    if run.started_at is not None:
        return RunRow(run, style, note, "so far", run.started_at, failure)
    return RunRow(run, style, note, "queued for", run.submitted_at, failure)


def failure_text(reason: str | None, failed_step: str | None, redactor: Redactor) -> str | None:
    """A run's failure without the step it names (shown beside it already), secrets redacted."""
    if not reason:
        return None
    text = redactor.text(reason)
    if failed_step and text.startswith(f"step '{failed_step}' ") and " failed: " in text:
        text = text.split(" failed: ", 1)[1]
    return text[:ERROR_CHARS]


def status_counts(
    counts: RunStatusCounts, query: Mapping[str, str], current: str | None
) -> list[StatusCount]:
    """`All`, then each listed status (and any other the tenant has): links to the list filtered by it."""
    shown = [status for status in LISTED_STATUSES if counts.counts.get(status) or status == current]
    shown += sorted(status for status in counts.counts if status not in LISTED_STATUSES)
    total = StatusCount(None, None, sum(counts.counts.values()), _url(query, status=None), current is None)
    return [
        total,
        *(
            StatusCount(s, status_style(s), counts.counts.get(s, 0), _url(query, status=s), s == current)
            for s in shown
        ),
    ]


def page_links(page: RunListPage, query: Mapping[str, str]) -> dict[str, str | None]:
    """The newest page, the newer one and the older one (None where there is none)."""
    first = page.prev_cursor is not None or "cursor" in query or "prev_cursor" in query
    return {
        "newest": _url(query, cursor=None, prev_cursor=None) if first else None,
        "newer": _url(query, cursor=None, prev_cursor=page.prev_cursor) if page.prev_cursor else None,
        "older": _url(query, cursor=page.next_cursor, prev_cursor=None) if page.next_cursor else None,
    }


def _url(query: Mapping[str, str], **changes: str | None) -> str:
    """The list's URL with the current parameters, `changes` applied (None removes one); a new
    filter starts from the newest page."""
    params = {key: value for key, value in query.items() if value != ""}
    if "status" in changes:
        params.pop("cursor", None)
        params.pop("prev_cursor", None)
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return f"{UI_PATH}/runs" + (f"?{urlencode(params)}" if params else "")
