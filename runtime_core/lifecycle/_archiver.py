"""RunArchiver: what happens to a finished run's state, one run at a time.

Owns the decision that a run is finished (its shared run ended before dispatch, or the local
run it is still dispatched to ended with its execution terminal), making sure its durable
evidence exists (terminal snapshot, written here if the engine's writer missed it; the
`execution.finalized` ledger entry and the execution's root span, waited for up to
`evidence_wait_ms`), writing its RunRecord, and only then retiring its hot state: the
shared run leaves the live structures (`retire_shared_run`), the execution's keys go
(`drop_execution`), the run-index records and dispatch attempts expire, a scale-out request
and the durable copy of the run's request (`QueuedRunCopies`) are forgotten. Every step is
idempotent, so a sweeper that dies half-way is simply repeated.
An ended attempt that its shared run has moved on from (recovered, redispatched) only has
its own index records retired; one whose acceptance the dispatcher has yet to record (a lost
reply being settled) waits for it. Must not decide when: the sweeper calls it once a grace passed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum

from runtime_core.audit import ExecutionDocument, SnapshotWriter, execution_span_id, trace_id_for
from runtime_core.dag import DagStore, DropOutcome, ExecutionStatus
from runtime_core.hot_state import HotState
from runtime_core.instances import RunExecutionIndex, RunIndexRecord
from runtime_core.lifecycle._records import run_record
from runtime_core.lifecycle._settings import HotStateRetention
from runtime_core.queueing import (
    RetireOutcome,
    ScaleOutRequestStore,
    SharedQueue,
    SharedRunRecord,
    SharedRunStatus,
    SharedRunStore,
)
from runtime_core.storage import DurableStore

log = logging.getLogger("runtime_core.lifecycle")

_WAITING_FOR_DISPATCH = (
    SharedRunStatus.SUBMITTED,
    SharedRunStatus.QUEUED_GLOBALLY,
    SharedRunStatus.SCALE_OUT_REQUESTED,
)


@dataclass(frozen=True)
class _Ending:
    """How a run ended: its execution's terminal document, or None when it never created one."""

    document: ExecutionDocument | None


class ArchiveOutcome(Enum):
    ARCHIVED = "archived"  # run record written, hot state retired
    SUPERSEDED = "superseded"  # an earlier attempt (or a run without shared run): index records only
    WAITING = "waiting"  # evidence not durable yet: the sweeper comes back after its lease
    NOT_FINISHED = "not_finished"  # the run goes on (or never ended): nothing retired
    GONE = "gone"  # nothing left to archive


@dataclass(frozen=True)
class ArchiverParts:
    hot_state: HotState
    runs: SharedRunStore
    queue: SharedQueue
    index: RunExecutionIndex
    dag_store: DagStore
    scale_out: ScaleOutRequestStore
    store: DurableStore
    snapshots: SnapshotWriter


class RunArchiver:
    def __init__(self, parts: ArchiverParts, settings: HotStateRetention) -> None:
        self.parts = parts
        self.settings = settings

    # Runs dispatched to a local run that ended

    async def archive_local_end(self, local_run_id: str) -> ArchiveOutcome:
        p = self.parts
        local = await p.index.get_local(local_run_id)
        if local is None or not local.status.is_terminal:
            await p.index.forget_ended(local_run_id)
            return ArchiveOutcome.GONE if local is None else ArchiveOutcome.NOT_FINISHED
        shared = await p.runs.get(local.shared_run_id) if local.shared_run_id else None
        if shared is None or shared.local_run_id != local_run_id or shared.status in _WAITING_FOR_DISPATCH:
            if shared is not None and await self._dispatch_unrecorded(shared, local):
                return ArchiveOutcome.WAITING
            await p.index.retire(local, self.settings.record_retention_ms)
            return ArchiveOutcome.SUPERSEDED
        ending = await self._ending(local)
        if ending is None:
            log.warning(
                "lifecycle.run_not_finished",
                extra={
                    "shared_run_id": shared.shared_run_id,
                    "local_run_id": local_run_id,
                    "execution_id": local.execution_id,
                    "tenant_id": local.tenant_id,
                },
            )
            await p.index.forget_ended(local_run_id)
            return ArchiveOutcome.NOT_FINISHED
        if not await self._evidence_ready(local):
            return ArchiveOutcome.WAITING
        return await self._archive(shared, local, ending.document)

    async def _dispatch_unrecorded(self, shared: SharedRunRecord, local: RunIndexRecord) -> bool:
        """The local run ended on its own before its dispatch was recorded: the instance accepted
        the attempt (it holds it) but the dispatcher has not marked the shared run yet (the
        reply was lost and is being settled, or the pump died and the next claimer settles it).
        Retiring it now would leave the shared run, once marked, never archived."""
        waiting = shared.status in _WAITING_FOR_DISPATCH and shared.local_run_id != local.local_run_id
        if not waiting or local.taken_over_by is not None:
            return False
        return await self.parts.index.holds_attempt(shared.shared_run_id, local.local_run_id)

    async def _ending(self, local: RunIndexRecord) -> _Ending | None:
        """How the local run's execution ended; None while it is still Running (or unknown).

        The terminal snapshot is written now from the hot state when the engine's snapshot
        writer missed it, and read back from the durable store when an earlier, interrupted
        archiving already dropped the keys.
        """
        p = self.parts
        if local.execution_id is None:
            return _Ending(None)
        status = await p.dag_store.execution_status(local.execution_id)
        if status is not None and not ExecutionStatus(status).is_terminal:
            return None
        # The engine's snapshot writer wrote it at finalization, as a rule: read it first (one
        # row) instead of rebuilding the whole document only to find it stored.
        terminal = await p.store.get_snapshot(local.execution_id, local.tenant_id)
        if terminal is None and status is not None:
            terminal = await p.snapshots.write_snapshot(local.execution_id)
        if terminal is None:
            return None
        return _Ending(ExecutionDocument.model_validate(terminal.snapshot))

    async def _evidence_ready(self, local: RunIndexRecord) -> bool:
        """The execution's finalized ledger entry and root span are durable (or waited long enough)."""
        execution_id = local.execution_id
        if execution_id is None:
            return True
        store = self.parts.store
        ledger = await store.has_ledger_event(local.tenant_id, execution_id, "execution.finalized")
        trace = await store.has_span(
            local.tenant_id, trace_id_for(execution_id), execution_span_id(execution_id)
        )
        if ledger and trace:
            return True
        waited_ms = await self.parts.hot_state.server_time_ms() - (local.completed_at_ms or 0)
        if waited_ms < self.settings.evidence_wait_ms:
            return False
        log.warning(
            "lifecycle.archived_without_evidence",
            extra={
                "execution_id": execution_id,
                "tenant_id": local.tenant_id,
                "ledger": ledger,
                "trace": trace,
            },
        )
        return True

    # Runs that ended before any dispatch (Rejected, Cancelled, Failed)

    async def archive_shared_end(self, shared_run_id: str) -> ArchiveOutcome:
        runs, retention = self.parts.runs, self.settings.record_retention_ms
        shared = await runs.get(shared_run_id)
        if shared is None or shared.snapshot is None:
            # Nothing to keep: the script removes whatever is left of it and its ended entry.
            await runs.retire(shared_run_id, shared.tenant_id if shared else "", None, retention)
            return ArchiveOutcome.GONE
        if shared.status in _WAITING_FOR_DISPATCH or shared.status is SharedRunStatus.DISPATCHED:
            await runs.retire(shared_run_id, shared.tenant_id, None, retention)  # refused: drops the entry
            return ArchiveOutcome.NOT_FINISHED
        return await self._archive(shared, None, None)

    # Both

    async def _archive(
        self, shared: SharedRunRecord, local: RunIndexRecord | None, document: ExecutionDocument | None
    ) -> ArchiveOutcome:
        p, retention = self.parts, self.settings.record_retention_ms
        item = await p.queue.item(shared.shared_run_id)
        ended_at_ms = (
            (local.completed_at_ms if local else None) or shared.updated_at_ms or shared.created_at_ms
        )
        await p.store.put_run_record(
            run_record(
                shared,
                queue_status=item.status.value if item else shared.queue_status,
                local=local,
                document=document,
                ended_at_ms=ended_at_ms,
            )
        )
        ended_by = local.local_run_id if local else None
        if ended_by is not None and shared.flow_key:
            # The release its instance made when the run ended, again (idempotent): a process
            # that died in between left the key's slot taken.
            await p.queue.release_key(shared.shared_run_id, ended_by)
        if (
            await p.runs.retire(shared.shared_run_id, shared.tenant_id, ended_by, retention)
            is RetireOutcome.NOT_FINISHED
        ):
            return ArchiveOutcome.NOT_FINISHED  # recovered meanwhile: its record is rewritten when it ends
        if local is not None:
            if local.execution_id is not None:
                await p.dag_store.drop_finished(local.execution_id)
            await p.index.retire(local, retention)
        if shared.scale_out_request_id:
            await p.scale_out.forget(shared.scale_out_request_id)
        await p.store.delete_submitted_run(shared.tenant_id, shared.shared_run_id)
        log.info(
            "lifecycle.run_archived",
            extra={
                "shared_run_id": shared.shared_run_id,
                "tenant_id": shared.tenant_id,
                "local_run_id": ended_by,
                "execution_id": local.execution_id if local else None,
            },
        )
        return ArchiveOutcome.ARCHIVED

    # Executions a replay restored

    async def drop_restored(self, execution_id: str) -> bool:
        """Drop a restored terminal execution again; False while it runs (restored from an archive)."""
        return await self.parts.dag_store.drop_finished(execution_id) is not DropOutcome.STILL_RUNNING
