"""A run's view, shared by the dashboard and the MCP Apps resource: its DAG, timeline and history.

Owns reading what a run view shows from the runtime_core services the tools call
(`RunViewReader`), the layered layout of the DAG (and its summary by layer when too large to
draw), how statuses look (colour and text), the step timeline and per-step histories, how
times and durations read, what of a value may be shown (secrets redacted, size capped), and
rendering them (SVG; the self-contained MCP App HTML). Must not authenticate or authorize:
callers admit the principal through the tool guard first and pass the snapshot it gives.
"""

from mcp_runtime.run_view._graph import MAX_DRAWN_STEPS, LayerSummary, RunGraph, StepNode, build_run_graph
from mcp_runtime.run_view._history import StepAttempt, StepEvent, StepHistory, step_histories
from mcp_runtime.run_view._humanize import (
    between,
    clock_text,
    duration_text,
    exact_text,
    iso_text,
    relative_text,
)
from mcp_runtime.run_view._layout import GraphLayout, GraphStep, NodeBox, layered_layout
from mcp_runtime.run_view._reader import RunEvidence, RunViewReader
from mcp_runtime.run_view._redaction import REDACTED, Redactor, ShownValue, secret_key, shown
from mcp_runtime.run_view._render import (
    STYLESHEET,
    graph_svg,
    run_app_html,
    template_environment,
    timeline_svg,
)
from mcp_runtime.run_view._status import (
    NOT_RUN,
    STATUS_STYLES,
    STEP_LEGEND,
    StatusStyle,
    shown_run_status,
    status_style,
)
from mcp_runtime.run_view._timeline import Timeline, TimelineRow, build_timeline

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Reading
    "RunViewReader",
    "RunEvidence",
    # The graph
    "RunGraph",
    "StepNode",
    "build_run_graph",
    "MAX_DRAWN_STEPS",
    "LayerSummary",
    "GraphLayout",
    "GraphStep",
    "NodeBox",
    "layered_layout",
    # Statuses
    "StatusStyle",
    "STATUS_STYLES",
    "STEP_LEGEND",
    "NOT_RUN",
    "status_style",
    "shown_run_status",
    # Times and durations
    "duration_text",
    "relative_text",
    "exact_text",
    "clock_text",
    "iso_text",
    "between",
    # What may be shown of a value
    "Redactor",
    "ShownValue",
    "shown",
    "secret_key",
    "REDACTED",
    # Timeline and history
    "Timeline",
    "TimelineRow",
    "build_timeline",
    "StepHistory",
    "StepAttempt",
    "StepEvent",
    "step_histories",
    # Rendering
    "graph_svg",
    "timeline_svg",
    "run_app_html",
    "STYLESHEET",
    "template_environment",
]
