"""Tenant-checked run lookup: any of SharedRunId, LocalRunId or ExecutionId -> a located run.

Owns resolving an id through the shared run store and the run-execution index, comparing
the stored snapshot's tenant with the caller's BEFORE anything touches a local controller,
and falling back to the durable RunRecord of a finished run whose hot state was retired (or
is being retired: a hot shared run marked archived answers from its record too). The
durable lookup is filtered by the caller's tenant, so unknown and foreign ids raise the
same NotFoundError either way. A SharedRunId resolves to the local run it is dispatched to
(not an older or refused attempt). Must not change any state.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.dag import DagStore
from runtime_core.identity import ExecutionContextSnapshot, parse_any_run_id
from runtime_core.instances import RunExecutionIndex, RunIndexRecord, run_not_found
from runtime_core.queueing import SharedRunRecord, SharedRunStatus, SharedRunStore
from runtime_core.storage import DurableStore, RunRecord


@dataclass(frozen=True)
class LocatedRun:
    """`archived`: the durable record of a finished run; when set, it is the whole answer."""

    shared: SharedRunRecord | None
    local: RunIndexRecord | None
    execution_id: str | None
    snapshot: ExecutionContextSnapshot
    archived: RunRecord | None = None


_ID_FIELDS = {"shared": "shared_run_id", "local": "local_run_id", "execution": "execution_id"}


def _archived_run(record: RunRecord) -> LocatedRun:
    snapshot = ExecutionContextSnapshot.model_validate(record.snapshot)
    return LocatedRun(None, None, record.execution_id, snapshot, archived=record)


class RunLocator:
    def __init__(
        self,
        runs: SharedRunStore,
        index: RunExecutionIndex,
        dag_store: DagStore,
        archive: DurableStore | None = None,
    ) -> None:
        self.runs = runs
        self.index = index
        self.dag_store = dag_store
        self.archive = archive

    async def locate(self, any_id: str, caller: ExecutionContextSnapshot) -> LocatedRun:
        located = await self._locate_hot(any_id, caller)
        if located is not None and not self._maybe_archived(located):
            return located
        archived = await self.archived(any_id, caller)
        if archived is not None:
            return _archived_run(archived)
        if located is not None:
            return located
        raise run_not_found(any_id)

    async def archived(self, any_id: str, caller: ExecutionContextSnapshot) -> RunRecord | None:
        """The caller's tenant's durable record of a finished run, by any of its ids."""
        if self.archive is None:
            return None
        kind, run_id = parse_any_run_id(any_id)
        field = _ID_FIELDS.get(kind)
        if field is None:
            return None
        return await self.archive.find_run_record(caller.tenant_id, **{field: run_id})

    @staticmethod
    def _maybe_archived(located: LocatedRun) -> bool:
        """Its shared run was archived, or expired while its local run's record is still hot."""
        if located.shared is not None:
            return located.shared.archived_at_ms is not None
        return located.local is not None and located.local.shared_run_id is not None

    async def _locate_hot(self, any_id: str, caller: ExecutionContextSnapshot) -> LocatedRun | None:
        if any_id.startswith("srun_"):
            return await self._from_shared(any_id, caller)
        local = await self.index.find(any_id)
        if local is not None:
            if local.tenant_id != caller.tenant_id:
                return None
            shared = await self._visible_shared(local.shared_run_id, caller)
            return LocatedRun(shared, local, local.execution_id, local.snapshot)
        if any_id.startswith("exec_"):
            meta = await self.dag_store.load_meta(any_id)
            if meta is not None and meta.snapshot is not None and meta.snapshot.tenant_id == caller.tenant_id:
                return LocatedRun(None, None, any_id, meta.snapshot)
        return None

    async def _from_shared(self, shared_run_id: str, caller: ExecutionContextSnapshot) -> LocatedRun | None:
        shared = await self._visible_shared(shared_run_id, caller)
        if shared is None or shared.snapshot is None:
            return None
        local = await self._current_attempt(shared)
        if local is not None and local.tenant_id != caller.tenant_id:
            local = None
        return LocatedRun(shared, local, local.execution_id if local else None, shared.snapshot)

    async def _current_attempt(self, shared: SharedRunRecord) -> RunIndexRecord | None:
        """The local run the shared run is dispatched to; else the latest one (pointer)."""
        if shared.status is SharedRunStatus.DISPATCHED and shared.local_run_id:
            dispatched = await self.index.get_local(shared.local_run_id)
            if dispatched is not None:
                return dispatched
        return await self.index.get_by_shared(shared.shared_run_id)

    async def _visible_shared(
        self, shared_run_id: str | None, caller: ExecutionContextSnapshot
    ) -> SharedRunRecord | None:
        if not shared_run_id:
            return None
        shared = await self.runs.get(shared_run_id)
        if shared is None or shared.snapshot is None or shared.snapshot.tenant_id != caller.tenant_id:
            return None
        return shared
