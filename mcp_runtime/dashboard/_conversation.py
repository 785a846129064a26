"""The conversation view of a run page: each `ai.agent` step's transcript, and streaming steps' live text.

Owns turning the run view's step rows (their `agent` sub-steps and live `output`) into what
`conversation.html.j2` shows beside the graph: per agent step, the task's turns in order (the
model's text and the tool calls it asked for, each tool call's arguments, approval and the
result the model read, with state, attempts, tokens and duration), plus the text a running
step has written so far; and the signature the live stream compares so the page refreshes
when a turn, a tool call or streamed text arrives. Must not read anything itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runtime_core.control_plane import RunStatusView

_SHOWN_CHARS = 4_000


@dataclass(frozen=True)
class Entry:
    """One sub-step as the page shows it."""

    seq: int
    kind: str  # model | tool
    state: str
    title: str
    text: str
    details: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Conversation:
    step: str
    entries: list[Entry]
    live_text: str | None  # the running turn's text so far


def conversations(run: RunStatusView) -> list[Conversation]:
    """One per step with a transcript or live output, in step order."""
    shown = []
    for row in run.steps:
        if not row.agent and not row.output:
            continue
        entries = [_entry(sub_step) for sub_step in row.agent or []]
        live = row.output[-_SHOWN_CHARS:] if row.output and row.status == "Running" else None
        shown.append(Conversation(step=row.name, entries=entries, live_text=live))
    return shown


def conversation_signature(run: RunStatusView) -> list[Any]:
    """Changes whenever a sub-step begins or ends or more text streams in."""
    return [
        [row.name, [[s.get("seq"), s.get("state")] for s in row.agent or []], row.output_length]
        for row in run.steps
        if row.agent or row.output
    ]


def _entry(sub_step: dict[str, Any]) -> Entry:
    output = sub_step.get("output") or {}
    details = [("state", str(sub_step.get("state"))), ("attempts", str(sub_step.get("attempts", 1)))]
    started, ended = sub_step.get("startedAtMs"), sub_step.get("endedAtMs")
    if started is not None and ended is not None:
        details.append(("duration", f"{int(ended) - int(started)} ms"))
    usage = sub_step.get("usage") or {}
    if usage:
        details.append(("tokens", f"{usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out"))
    if sub_step.get("kind") == "model":
        calls = output.get("toolCalls") or []
        asked = ", ".join(f"{call.get('name')}({_compact(call.get('arguments'))})" for call in calls)
        if asked:
            details.append(("calls", asked))
        title = f"Model turn {sub_step.get('turn', 0)}"
    else:
        approval = sub_step.get("approval")
        if approval:
            verdict = "approved" if approval.get("approved") else "refused"
            comment = f": {approval['comment']}" if approval.get("comment") else ""
            details.append(("approval", verdict + comment))
        details.append(("arguments", _compact(sub_step.get("input"))))
        title = f"Tool {sub_step.get('name')}"
    return Entry(
        seq=int(sub_step.get("seq", 0)),
        kind="model" if sub_step.get("kind") == "model" else "tool",
        state=str(sub_step.get("state")),
        title=title,
        text=str(output.get("text", ""))[:_SHOWN_CHARS],
        details=details,
    )


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)[:300]
