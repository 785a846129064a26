"""ReplayService: Replay(ExecutionId) and strict replay validation.

Owns the replay decision (live state present -> nothing to do; deleted -> restore from the
terminal snapshot, or for a non-terminal execution from its archive) and the strict check
that the live fingerprint equals the terminal snapshot's. A terminal execution it restored
is reported to `on_restored` (the lifecycle drops it again after its grace). Tenant
boundary: a foreign tenant's execution is reported exactly like an unknown one. Must not
run the execution.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from runtime_core.audit._checkpoints import ExecutionCheckpoints, unknown_execution
from runtime_core.audit._document import ExecutionDocument, view_from_document
from runtime_core.audit._fingerprints import fingerprint_view
from runtime_core.audit._restore import RestoreOutcome, restore_execution
from runtime_core.dag import DagStore, ExecutionStatus
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.retention import PayloadResolver
from runtime_core.storage import DurableStore


class ReplaySource(StrEnum):
    LIVE = "live"
    TERMINAL_SNAPSHOT = "terminal_snapshot"
    ARCHIVE = "archive"


class ReplayResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    execution_id: str
    already_exists: bool
    restored: bool
    source: ReplaySource
    status: str


class ReplayValidation(BaseModel):
    """Strict replay validation: live, stored and recomputed snapshot fingerprints all equal."""

    model_config = ConfigDict(frozen=True)

    execution_id: str
    valid: bool
    live_fingerprint: str | None = None
    snapshot_fingerprint: str | None = None
    recomputed_snapshot_fingerprint: str | None = None
    reason: str


class ReplayService:
    def __init__(
        self,
        dag_store: DagStore,
        store: DurableStore,
        resolver: PayloadResolver,
        checkpoints: ExecutionCheckpoints,
    ) -> None:
        self.dag_store = dag_store
        self.store = store
        self.resolver = resolver
        self.checkpoints = checkpoints
        self.on_restored: Callable[[str], Awaitable[None]] | None = None

    async def replay(self, execution_id: str, snapshot: ExecutionContextSnapshot) -> ReplayResult:
        with restored_snapshot(snapshot):
            live_status = await self._live_status(execution_id, snapshot)
            if live_status is not None:
                return ReplayResult(
                    execution_id=execution_id,
                    already_exists=True,
                    restored=False,
                    source=ReplaySource.LIVE,
                    status=live_status,
                )
            document, source = await self._document(execution_id, snapshot.tenant_id)
            outcome = await restore_execution(self.dag_store, document)
            restored_terminal = ExecutionStatus(document.status).is_terminal
            if outcome is RestoreOutcome.RESTORED and restored_terminal and self.on_restored is not None:
                await self.on_restored(execution_id)
            return ReplayResult(
                execution_id=execution_id,
                already_exists=outcome is RestoreOutcome.ALREADY_EXISTS,
                restored=outcome is RestoreOutcome.RESTORED,
                source=source if outcome is RestoreOutcome.RESTORED else ReplaySource.LIVE,
                status=document.status,
            )

    async def validate(self, execution_id: str, snapshot: ExecutionContextSnapshot) -> ReplayValidation:
        with restored_snapshot(snapshot):
            live_status = await self._live_status(execution_id, snapshot)
            terminal = await self.store.get_snapshot(execution_id, snapshot.tenant_id)
            if terminal is None:
                if live_status is None:
                    raise unknown_execution(execution_id)
                return ReplayValidation(
                    execution_id=execution_id, valid=False, reason="no terminal snapshot exists yet"
                )
            document = ExecutionDocument.model_validate(terminal.snapshot)
            recomputed = await fingerprint_view(view_from_document(document), self.resolver)
            view = await self.dag_store.read_execution(execution_id) if live_status is not None else None
            if view is None:
                return ReplayValidation(
                    execution_id=execution_id,
                    valid=False,
                    snapshot_fingerprint=terminal.fingerprint,
                    recomputed_snapshot_fingerprint=recomputed,
                    reason="no live state; replay the execution first",
                )
            live = await fingerprint_view(view, self.resolver)
            valid = live == terminal.fingerprint == recomputed
            return ReplayValidation(
                execution_id=execution_id,
                valid=valid,
                live_fingerprint=live,
                snapshot_fingerprint=terminal.fingerprint,
                recomputed_snapshot_fingerprint=recomputed,
                reason="fingerprints match" if valid else "fingerprints differ",
            )

    async def _live_status(self, execution_id: str, snapshot: ExecutionContextSnapshot) -> str | None:
        """Live status for the caller's tenant, None without live state; foreign -> NotFoundError."""
        tenant_id, status = await self.dag_store.hot_state.redis.hmget(
            self.dag_store.keys(execution_id).meta, ["tenant_id", "status"]
        )
        if status is None:
            return None
        if tenant_id != snapshot.tenant_id:
            raise unknown_execution(execution_id)
        return str(status)

    async def _document(self, execution_id: str, tenant_id: str) -> tuple[ExecutionDocument, ReplaySource]:
        terminal = await self.store.get_snapshot(execution_id, tenant_id)
        if terminal is not None:
            return ExecutionDocument.model_validate(terminal.snapshot), ReplaySource.TERMINAL_SNAPSHOT
        document = await self.checkpoints.document_from_archive(execution_id, tenant_id)
        if document is None:
            raise unknown_execution(execution_id)
        return document, ReplaySource.ARCHIVE
