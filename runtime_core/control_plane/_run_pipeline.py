"""RunPipelineReader: the pipeline definition (the DAG) a run of the caller's tenant executes.

Owns finding, for any id of a run, the definition it runs: its execution's own meta once the
execution exists (what really runs), else the shared run's submitted definition. The lookup
is tenant-checked by the RunLocator, so foreign and unknown ids raise the same
NotFoundError. Answers None once the run's hot state is gone (the terminal snapshot then
holds it: `AuditQueries.terminal_pipeline`). Must not change any state.
"""

from __future__ import annotations

from runtime_core.control_plane._run_access import RunLocator
from runtime_core.dag import DagStore
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.pipeline import PipelineDefinition


class RunPipelineReader:
    def __init__(self, locator: RunLocator, dag_store: DagStore) -> None:
        self.locator = locator
        self.dag_store = dag_store

    async def read(self, any_id: str, caller: ExecutionContextSnapshot) -> PipelineDefinition | None:
        located = await self.locator.locate(any_id, caller)
        with restored_snapshot(located.snapshot):
            if located.execution_id:
                meta = await self.dag_store.load_meta(located.execution_id)
                if meta is not None:
                    return meta.pipeline
        return located.shared.pipeline if located.shared is not None else None
