"""What the run page shows beyond the graph: its times, its data, a page of steps, a page of ledger.

Owns turning a run's graph, evidence (ledger, trace) and data (input, step outputs) into the
page's parts: submitted / started / ended times and the durations between them; the input,
the result and each shown step's output as capped, redacted JSON; each step's input bindings
(`name <- state.x` / `steps.a.result`, literals redacted), attempt duration or, while it runs,
since when; the steps table a page at a time (filtered by status) for large runs; the ledger
a page at a time with times as dates, values as JSON, and the attributes every entry repeats
said once above it; and the runs this one was run again as, or of. Must not read anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from mcp_runtime.run_view import (
    Redactor,
    RunEvidence,
    RunGraph,
    ShownValue,
    StepHistory,
    StepNode,
    duration_text,
    exact_text,
    shown,
    status_style,
)
from runtime_core.bulk_actions import RETRIED_EVENT, RETRY_OF_ATTRIBUTE, RETRY_RUN_ATTRIBUTE
from runtime_core.control_plane import RunData, StepErrorView
from runtime_core.pipeline import StepDefinition, effective_step_inputs, is_binding
from runtime_core.storage import LedgerEntry

STEPS_PER_PAGE = 100
LEDGER_PER_PAGE = 100
VALUE_CHARS = 16_000
"""A value (input, result, output) is shown up to this many characters; the rest is counted."""
PREVIEW_CHARS = 160


@dataclass(frozen=True)
class Timing:
    submitted_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    total: str
    queued: str | None
    ran: str | None
    ticking_since: datetime | None
    """While unfinished: the total counts from here (the page's script keeps it ticking)."""


def run_timing(graph: RunGraph, now: datetime) -> Timing:
    run = graph.run
    submitted, started, ended = run.submitted_at, run.started_at, run.ended_at
    until = ended or now
    queued = duration_text((started - submitted).total_seconds()) if started and submitted else None
    ran = duration_text((until - started).total_seconds()) if started else None
    total = duration_text((until - submitted).total_seconds()) if submitted else "-"
    return Timing(submitted, started, ended, total, queued, ran, None if ended else submitted)


@dataclass(frozen=True)
class StepLine:
    node: StepNode
    bindings: list[tuple[str, str]]
    output: ShownValue | None
    duration: str
    last_error: StepErrorView | None
    history: StepHistory | None


@dataclass(frozen=True)
class Paging:
    page: int
    pages: int
    total: int
    prev_url: str | None
    next_url: str | None


@dataclass(frozen=True)
class StepsPage:
    lines: list[StepLine]
    paging: Paging
    status: str | None
    choices: list[tuple[str, str, int]]
    """(status, label, steps) of every status the run's steps have, for the filter."""


def page_number(query: Mapping[str, str], name: str) -> int:
    try:
        return max(1, int(query.get(name, "1")))
    except ValueError:
        return 1


def steps_on_page(graph: RunGraph, query: Mapping[str, str]) -> tuple[list[StepNode], Paging, str | None]:
    """The steps the page lists (all of a small run; a page of a large one, by status filter)."""
    status = query.get("steps_status") or None
    nodes = [node for node in graph.nodes if status is None or node.status == status]
    pages = max(1, math.ceil(len(nodes) / STEPS_PER_PAGE))
    page = min(page_number(query, "steps_page"), pages)
    shown_nodes = nodes[(page - 1) * STEPS_PER_PAGE : page * STEPS_PER_PAGE]
    return shown_nodes, _paging(query, "steps_page", page, pages, len(nodes), "steps"), status


def steps_page(
    graph: RunGraph,
    evidence: RunEvidence | None,
    data: RunData,
    redactor: Redactor,
    query: Mapping[str, str],
) -> StepsPage:
    nodes, paging, status = steps_on_page(graph, query)
    definitions = {step.name: step for step in graph.pipeline.steps} if graph.pipeline else {}
    rows = {row.name: row for row in graph.run.steps}
    histories = evidence.histories if evidence else {}
    lines = []
    for node in nodes:
        history = histories.get(node.name)
        output = data.outputs.get(node.name)
        lines.append(
            StepLine(
                node=node,
                bindings=_bindings(definitions.get(node.name), redactor),
                output=shown(output, redactor, VALUE_CHARS) if output is not None else None,
                duration=_last_attempt(history),
                last_error=rows[node.name].last_error if node.name in rows else None,
                history=history,
            )
        )
    counts: dict[str, int] = {}
    for node in graph.nodes:
        counts[node.status] = counts.get(node.status, 0) + 1
    choices = [(s, status_style(s).label, n) for s, n in sorted(counts.items())]
    return StepsPage(lines, paging, status, choices)


def _bindings(step: StepDefinition | None, redactor: Redactor) -> list[tuple[str, str]]:
    """`name <- binding` per input of the step; a literal input is shown as redacted JSON."""
    if step is None:
        return []
    return [
        (name, value if is_binding(value) else _preview(redactor.value({name: value})[name]))
        for name, value in sorted(effective_step_inputs(step).items())
    ]


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _last_attempt(history: StepHistory | None) -> str:
    if history is None or not history.attempts:
        return "-"
    return duration_text(history.attempts[-1].duration_ms / 1000)


@dataclass(frozen=True)
class LedgerLine:
    entry: LedgerEntry
    instance: str
    details: list[tuple[str, str]]


@dataclass(frozen=True)
class LedgerPage:
    lines: list[LedgerLine]
    constants: list[tuple[str, str]]
    """Attributes that never change from entry to entry (said once, not on every row that has them)."""
    instance: str | None
    """The runtime instance of every entry, when they share one (its column is left out then)."""
    paging: Paging


def _instance(entry: LedgerEntry) -> str:
    return entry.runtime_instance_id or entry.assigned_runtime_instance_id or ""


def ledger_page(entries: Sequence[LedgerEntry], redactor: Redactor, query: Mapping[str, str]) -> LedgerPage:
    constants = _constant_attributes(entries)
    instances = {_instance(entry) for entry in entries if _instance(entry)}
    pages = max(1, math.ceil(len(entries) / LEDGER_PER_PAGE))
    page = min(page_number(query, "ledger_page"), pages)
    shown_entries = entries[(page - 1) * LEDGER_PER_PAGE : page * LEDGER_PER_PAGE]
    lines = [
        LedgerLine(
            entry,
            _instance(entry),
            [
                (key, readable(key, value, redactor))
                for key, value in sorted(entry.attributes.items())
                if key not in constants
            ],
        )
        for entry in shown_entries
    ]
    said_once = [(key, readable(key, value, redactor)) for key, value in sorted(constants.items())]
    return LedgerPage(
        lines,
        said_once,
        instances.pop() if len(instances) == 1 else None,
        _paging(query, "ledger_page", page, pages, len(entries), "ledger"),
    )


def _constant_attributes(entries: Sequence[LedgerEntry]) -> dict[str, Any]:
    """Attributes two entries or more carry, always with the same value."""
    values: dict[str, list[Any]] = {}
    for entry in entries:
        for key, value in entry.attributes.items():
            values.setdefault(key, []).append(value)
    return {
        key: seen[0] for key, seen in values.items() if len(seen) >= 2 and all(v == seen[0] for v in seen[1:])
    }


def readable(key: str, value: Any, redactor: Redactor) -> str:
    """A ledger value as a person reads it: a time in ms as a date, structures as JSON, secrets out."""
    clean = redactor.value({key: value})[key]
    if key.endswith("_at_ms") and isinstance(clean, int | float) and not isinstance(clean, bool):
        if clean <= 0:
            return "none"
        return exact_text(datetime.fromtimestamp(clean / 1000, tz=UTC), milliseconds=True)
    if isinstance(clean, str):
        return clean
    return json.dumps(clean, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class RunLinks:
    run_again_of: str | None
    run_again_as: list[str]


def run_links(entries: Sequence[LedgerEntry]) -> RunLinks:
    """The run this one is a new run of (`retry.of`), and the new runs made of it."""
    original = next(
        (str(e.attributes[RETRY_OF_ATTRIBUTE]) for e in entries if RETRY_OF_ATTRIBUTE in e.attributes), None
    )
    again = [
        str(e.attributes[RETRY_RUN_ATTRIBUTE])
        for e in entries
        if e.event == RETRIED_EVENT and RETRY_RUN_ATTRIBUTE in e.attributes
    ]
    return RunLinks(original, list(dict.fromkeys(again)))


def _paging(query: Mapping[str, str], name: str, page: int, pages: int, total: int, anchor: str) -> Paging:
    def url(number: int) -> str:
        params = {**{k: v for k, v in query.items() if v != ""}, name: str(number)}
        return f"?{urlencode(params)}#{anchor}"

    return Paging(
        page=page,
        pages=pages,
        total=total,
        prev_url=url(page - 1) if page > 1 else None,
        next_url=url(page + 1) if page < pages else None,
    )
