"""Tenant-checked run lookup: any of SharedRunId, LocalRunId or ExecutionId -> a located run.

Owns resolving an id through the shared run store and the run-execution index, comparing
the stored snapshot's tenant with the caller's BEFORE anything touches a local controller.
Unknown and foreign ids raise the same NotFoundError. Must not change any state.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.dag import DagStore
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import RunExecutionIndex, RunIndexRecord, run_not_found
from runtime_core.queueing import SharedRunRecord, SharedRunStore


@dataclass(frozen=True)
class LocatedRun:
    shared: SharedRunRecord | None
    local: RunIndexRecord | None
    execution_id: str | None
    snapshot: ExecutionContextSnapshot


class RunLocator:
    def __init__(self, runs: SharedRunStore, index: RunExecutionIndex, dag_store: DagStore) -> None:
        self.runs = runs
        self.index = index
        self.dag_store = dag_store

    async def locate(self, any_id: str, caller: ExecutionContextSnapshot) -> LocatedRun:
        if any_id.startswith("srun_"):
            return await self._from_shared(any_id, caller)
        local = await self.index.find(any_id)
        if local is not None:
            if local.tenant_id != caller.tenant_id:
                raise run_not_found(any_id)
            shared = await self._visible_shared(local.shared_run_id, caller)
            return LocatedRun(shared, local, local.execution_id, local.snapshot)
        if any_id.startswith("exec_"):
            meta = await self.dag_store.load_meta(any_id)
            if meta is not None and meta.snapshot is not None and meta.snapshot.tenant_id == caller.tenant_id:
                return LocatedRun(None, None, any_id, meta.snapshot)
        raise run_not_found(any_id)

    async def _from_shared(self, shared_run_id: str, caller: ExecutionContextSnapshot) -> LocatedRun:
        shared = await self._visible_shared(shared_run_id, caller)
        if shared is None or shared.snapshot is None:
            raise run_not_found(shared_run_id)
        local = await self.index.get_by_shared(shared_run_id)
        if local is not None and local.tenant_id != caller.tenant_id:
            local = None
        return LocatedRun(shared, local, local.execution_id if local else None, shared.snapshot)

    async def _visible_shared(
        self, shared_run_id: str | None, caller: ExecutionContextSnapshot
    ) -> SharedRunRecord | None:
        if not shared_run_id:
            return None
        shared = await self.runs.get(shared_run_id)
        if shared is None or shared.snapshot is None or shared.snapshot.tenant_id != caller.tenant_id:
            return None
        return shared
