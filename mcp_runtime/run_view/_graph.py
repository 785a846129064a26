"""RunGraph: one run's DAG with each step's shown status, ready to draw, and its live state.

Owns combining a run's status (`run.status`'s view) with the pipeline it executes: every
step of the pipeline is a node (steps the execution has not created yet are Pending, and
Not run once the run ended), its status shown with colour and text, its dependencies, its
layer, when its running attempt began, and the layered layout when the graph is small enough
to draw; above that, the graph is summarised by layer (steps and status counts per layer).
`live_state` is what the live views compare and send when it changes. Pure: no I/O, no
rendering.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcp_runtime.run_view._layout import GraphLayout, GraphStep, layer_of, layered_layout
from mcp_runtime.run_view._status import StatusStyle, shown_run_status, shown_step_status, status_style
from runtime_core.control_plane import RunStatusView, StepRow, run_final_status, run_is_done
from runtime_core.pipeline import PipelineDefinition
from runtime_core.tasks import InputRequest

MAX_DRAWN_STEPS = 400
"""Above this many steps the graph is summarised by layer instead of drawn."""


@dataclass(frozen=True)
class StepNode:
    name: str
    step_key: str
    status: str
    retry_count: int
    recovery_count: int
    depends_on: tuple[str, ...]
    layer: int = 0
    started_at: datetime | None = None

    @property
    def style(self) -> StatusStyle:
        return status_style(self.status)


@dataclass(frozen=True)
class LayerSummary:
    """One layer of a graph too large to draw: its steps' count by shown status."""

    layer: int
    steps: int
    statuses: list[tuple[StatusStyle, int]]
    unfinished: list[StepNode]
    """Its steps that did not complete (what a reader looks for), in definition order."""


@dataclass(frozen=True)
class RunGraph:
    run: RunStatusView
    pipeline: PipelineDefinition | None
    nodes: list[StepNode]
    layout: GraphLayout | None
    waiting: InputRequest | None

    @property
    def done(self) -> bool:
        return run_is_done(self.run)

    @property
    def status(self) -> str:
        """The one status a person reads: a running run parked on its gate or paused shows that."""
        return shown_run_status(run_final_status(self.run) or "Unknown", self.run.control_status, self.done)

    @property
    def run_id(self) -> str:
        return self.run.shared_run_id or self.run.requested_id

    def status_counts(self) -> str:
        counts = Counter(node.style.label for node in self.nodes)
        return ", ".join(f"{count} {label}" for label, count in counts.most_common())

    def layers(self) -> list[LayerSummary]:
        by_layer: dict[int, list[StepNode]] = {}
        for node in self.nodes:
            by_layer.setdefault(node.layer, []).append(node)
        return [
            LayerSummary(
                layer=layer,
                steps=len(nodes),
                statuses=[(status_style(s), n) for s, n in Counter(n.status for n in nodes).most_common()],
                unfinished=[node for node in nodes if node.status != "Completed"],
            )
            for layer, nodes in sorted(by_layer.items())
        ]

    def live_state(self) -> dict[str, Any]:
        """The run's and each step's shown status (with text and colour class): what live views send."""
        run_style = status_style(self.status)
        return {
            "run_id": self.run_id,
            "status": self.status,
            "status_text": run_style.text,
            "status_class": run_style.css_class,
            "control_status": self.run.control_status,
            "waiting_key": self.run.waiting_key,
            "done": self.done,
            "steps": [
                {
                    "name": node.name,
                    "status": node.status,
                    "label": node.style.label,
                    "text": node.style.text,
                    "css_class": node.style.css_class,
                    "retry_count": node.retry_count,
                }
                for node in self.nodes
            ],
        }


def build_run_graph(
    run: RunStatusView, pipeline: PipelineDefinition | None, waiting: InputRequest | None = None
) -> RunGraph:
    rows = {row.name: row for row in run.steps}
    waiting_step = waiting.waiting_step if waiting else None
    done = run_is_done(run)
    defined = pipeline.steps if pipeline is not None else []
    shapes = [(step.name, step.step_key, tuple(step.depends_on)) for step in defined]
    known = {name for name, _, _ in shapes}
    # An archived run whose definition is gone still shows its step rows (without edges).
    shapes += [(row.name, row.step_key, ()) for row in run.steps if row.name not in known]
    layers = layer_of([GraphStep(name, depends_on) for name, _, depends_on in shapes])
    nodes = [
        _node(name, key, depends_on, layers.get(name, 0), rows.get(name), waiting_step, done)
        for name, key, depends_on in shapes
    ]
    drawable = 0 < len(nodes) <= MAX_DRAWN_STEPS
    layout = layered_layout([GraphStep(n.name, n.depends_on) for n in nodes]) if drawable else None
    return RunGraph(run=run, pipeline=pipeline, nodes=nodes, layout=layout, waiting=waiting)


def _node(
    name: str,
    step_key: str,
    depends_on: tuple[str, ...],
    layer: int,
    row: StepRow | None,
    waiting_step: str | None,
    done: bool,
) -> StepNode:
    """A step the execution has not created yet (no row) is Pending (Not run once the run is done)."""
    if row is None:
        pending = shown_step_status("Pending", name, None, done)
        return StepNode(name, step_key, pending, 0, 0, depends_on, layer)
    status = shown_step_status(row.status, name, waiting_step, done)
    started = row.started_at if status == "Running" else None
    return StepNode(name, step_key, status, row.retry_count, row.recovery_count, depends_on, layer, started)
