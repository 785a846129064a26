"""RunViewReader: what a run view shows, read from the same runtime_core services the tools call.

Owns the reads behind a run's view: its status and the pipeline it executes (from hot state,
else from its terminal snapshot), the input its execution waits for, its data (the run's input
and the outputs of the steps shown) and its evidence (the ledger, up to LEDGER_ROWS entries,
and the trace, turned into a timeline and per-step histories). Every read takes the snapshot
its caller was admitted with for the matching tool (`run.status` for the graph and the data,
`ledger` / `trace` for the evidence), so tenant visibility is the services' own: a foreign
run id raises the same NotFoundError as an unknown one. Must not authorize nor render.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from mcp_runtime.run_view._graph import RunGraph, build_run_graph
from mcp_runtime.run_view._history import StepHistory, step_histories
from mcp_runtime.run_view._timeline import Timeline, build_timeline
from runtime_core.audit import AuditQueries
from runtime_core.control_plane import ControlPlane, RunData, RunStatusView, StepPage
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition
from runtime_core.storage import LedgerEntry, TraceSpan
from runtime_core.tasks import InputRequest, TaskService

LEDGER_ROWS = 5_000
"""The run page shows at most this many ledger entries (a page at a time); the ledger tool has all."""


@dataclass(frozen=True)
class RunEvidence:
    ledger: list[LedgerEntry]
    spans: list[TraceSpan]
    timeline: Timeline
    histories: dict[str, StepHistory]


class RunViewReader:
    def __init__(self, control_plane: ControlPlane, audit: AuditQueries, tasks: TaskService | None) -> None:
        self.control_plane = control_plane
        self.audit = audit
        self.tasks = tasks

    async def graph(self, run_id: str, snapshot: ExecutionContextSnapshot) -> RunGraph:
        """The run's DAG with every step's status (the `run.status` read of every step: the view
        draws, or summarises by layer, the whole DAG)."""
        run = await self.control_plane.run_status(run_id, snapshot, StepPage.every_step())
        pipeline = await self._pipeline(run_id, run, snapshot)
        return build_run_graph(run, pipeline, await self._waiting(run, snapshot))

    async def data(
        self, graph: RunGraph, snapshot: ExecutionContextSnapshot, step_names: Collection[str]
    ) -> RunData:
        """The run's input and the outputs of `step_names` (the `run.status` read)."""
        return await self.control_plane.run_data.read(graph.run_id, snapshot, step_names)

    async def evidence(self, run: RunStatusView, snapshot: ExecutionContextSnapshot) -> RunEvidence:
        """The run's ledger and trace (the `ledger` / `trace` reads)."""
        if run.shared_run_id:
            ledger = await self.audit.ledger(snapshot, shared_run_id=run.shared_run_id, limit=LEDGER_ROWS)
        elif run.execution_id:
            ledger = await self.audit.ledger(snapshot, execution_id=run.execution_id, limit=LEDGER_ROWS)
        else:
            ledger = []
        spans = await self.audit.trace(snapshot, run.execution_id) if run.execution_id else []
        return RunEvidence(ledger, spans, build_timeline(spans), step_histories(ledger, spans))

    async def _pipeline(
        self, run_id: str, run: RunStatusView, snapshot: ExecutionContextSnapshot
    ) -> PipelineDefinition | None:
        pipeline = await self.control_plane.run_pipeline(run_id, snapshot)
        if pipeline is None and run.execution_id:
            pipeline = await self.audit.terminal_pipeline(snapshot, run.execution_id)
        return pipeline

    async def _waiting(self, run: RunStatusView, snapshot: ExecutionContextSnapshot) -> InputRequest | None:
        if self.tasks is None or run.execution_id is None or run.control_status != "WaitingForInput":
            return None
        return await self.tasks.input_request(run.execution_id, snapshot)
