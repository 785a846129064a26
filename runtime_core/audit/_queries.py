"""AuditQueries: tenant-scoped reads of ledger, trace, forensics and terminal snapshots.

(Including the pipeline a finished execution ran, read from its terminal snapshot.)

Owns restoring the caller's snapshot around every observability query and flushing this
process's buffered recorders first (read-your-writes). The tenant filter is always the
caller's snapshot tenant: another tenant's ids give empty results, exactly like unknown
ids. Must not write audit records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runtime_core.audit._document import ExecutionDocument
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.storage import (
    DEFAULT_LEDGER_LIMIT,
    DurableStore,
    ForensicsRecord,
    LedgerEntry,
    TerminalSnapshot,
    TraceSpan,
)


class Flushable(Protocol):
    async def flush(self) -> None: ...


class AuditQueries:
    def __init__(self, store: DurableStore, flush_first: Sequence[Flushable] = ()) -> None:
        self.store = store
        self.flush_first = list(flush_first)

    async def ledger(
        self,
        snapshot: ExecutionContextSnapshot,
        *,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        limit: int = DEFAULT_LEDGER_LIMIT,
    ) -> list[LedgerEntry]:
        await self._flush()
        with restored_snapshot(snapshot):
            return await self.store.list_ledger(snapshot.tenant_id, execution_id, shared_run_id, limit)

    async def trace(self, snapshot: ExecutionContextSnapshot, execution_id: str) -> list[TraceSpan]:
        await self._flush()
        with restored_snapshot(snapshot):
            return await self.store.list_spans(snapshot.tenant_id, execution_id)

    async def forensics(
        self,
        snapshot: ExecutionContextSnapshot,
        *,
        runtime_instance_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[ForensicsRecord]:
        with restored_snapshot(snapshot):
            return await self.store.list_forensics(snapshot.tenant_id, runtime_instance_id, execution_id)

    async def terminal_snapshot(
        self, snapshot: ExecutionContextSnapshot, execution_id: str
    ) -> TerminalSnapshot | None:
        with restored_snapshot(snapshot):
            return await self.store.get_snapshot(execution_id, snapshot.tenant_id)

    async def terminal_pipeline(
        self, snapshot: ExecutionContextSnapshot, execution_id: str
    ) -> PipelineDefinition | None:
        """The pipeline a finished execution ran, from its terminal snapshot (None: no snapshot)."""
        terminal = await self.terminal_snapshot(snapshot, execution_id)
        if terminal is None:
            return None
        return parse_pipeline(ExecutionDocument.model_validate(terminal.snapshot).pipeline)

    async def _flush(self) -> None:
        for recorder in self.flush_first:
            await recorder.flush()
