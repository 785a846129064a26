"""RunGraph: one run's DAG with each step's shown status, ready to draw, and its live state.

Owns combining a run's status (`run.status`'s view) with the pipeline it executes: every
step of the pipeline is a node (steps the execution has not created yet are Pending), its
status shown with colour and text, its dependencies, and the layered layout when the graph
is small enough to draw. `live_state` is what the live views compare and send when it
changes. Pure: no I/O, no rendering.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from mcp_runtime.run_view._layout import GraphLayout, GraphStep, layered_layout
from mcp_runtime.run_view._status import StatusStyle, shown_step_status, status_style
from runtime_core.control_plane import RunStatusView, StepRow, run_final_status, run_is_done
from runtime_core.pipeline import PipelineDefinition
from runtime_core.tasks import InputRequest

MAX_DRAWN_STEPS = 400
"""Above this many steps the graph is not drawn (the step table still lists every step)."""


@dataclass(frozen=True)
class StepNode:
    name: str
    step_key: str
    status: str
    retry_count: int
    recovery_count: int
    depends_on: tuple[str, ...]

    @property
    def style(self) -> StatusStyle:
        return status_style(self.status)


@dataclass(frozen=True)
class RunGraph:
    run: RunStatusView
    pipeline: PipelineDefinition | None
    nodes: list[StepNode]
    layout: GraphLayout | None
    waiting: InputRequest | None

    @property
    def status(self) -> str:
        return run_final_status(self.run) or "Unknown"

    @property
    def done(self) -> bool:
        return run_is_done(self.run)

    @property
    def run_id(self) -> str:
        return self.run.shared_run_id or self.run.requested_id

    def status_counts(self) -> str:
        counts = Counter(node.style.label for node in self.nodes)
        return ", ".join(f"{count} {label}" for label, count in counts.most_common())

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
    defined = pipeline.steps if pipeline is not None else []
    nodes = [
        _node(step.name, step.step_key, step.depends_on, rows.get(step.name), waiting_step)
        for step in defined
    ]
    known = {node.name for node in nodes}
    # An archived run whose definition is gone still shows its step rows (without edges).
    nodes += [
        _node(row.name, row.step_key, (), row, waiting_step) for row in run.steps if row.name not in known
    ]
    drawable = 0 < len(nodes) <= MAX_DRAWN_STEPS
    layout = layered_layout([GraphStep(n.name, n.depends_on) for n in nodes]) if drawable else None
    return RunGraph(run=run, pipeline=pipeline, nodes=nodes, layout=layout, waiting=waiting)


def _node(
    name: str, step_key: str, depends_on: tuple[str, ...], row: StepRow | None, waiting_step: str | None
) -> StepNode:
    """A step the execution has not created yet (no row) is Pending."""
    if row is None:
        return StepNode(name, step_key, "Pending", 0, 0, tuple(depends_on))
    status = shown_step_status(row.status, name, waiting_step)
    return StepNode(name, step_key, status, row.retry_count, row.recovery_count, tuple(depends_on))
