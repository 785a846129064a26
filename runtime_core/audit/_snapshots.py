"""SnapshotWriter: the execution header at creation and the terminal snapshot at finalization.

Owns reading the terminal view, normalizing it into an ExecutionDocument (stored result
forms, no claims/leases/owners), fingerprinting the view that document describes, resolved
(the same function live state is fingerprinted with), and writing the TerminalSnapshot
once. Must never raise into the engine: `write_snapshot` can be called again explicitly.
"""

from __future__ import annotations

import logging

from runtime_core.audit._checkpoints import ExecutionCheckpoints
from runtime_core.audit._document import document_json
from runtime_core.audit._fingerprints import fingerprint_view, stored_results
from runtime_core.audit._metrics import RuntimeMetrics
from runtime_core.dag import DagStore, EngineEvent, ExecutionStatus, ExecutionView
from runtime_core.retention import PayloadResolver, ResolverError, tenant_of
from runtime_core.storage import DurableStore, TerminalSnapshot

log = logging.getLogger("runtime_core.audit")


class SnapshotWriter:
    wants_final_view = True  # the terminal snapshot is written from the finalizing call's read

    def __init__(
        self,
        dag_store: DagStore,
        store: DurableStore,
        resolver: PayloadResolver,
        checkpoints: ExecutionCheckpoints,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.dag_store = dag_store
        self.store = store
        self.resolver = resolver
        self.checkpoints = checkpoints
        self.metrics = metrics

    async def on_event(self, event: EngineEvent) -> None:
        try:
            if event.name == "execution.created":
                meta = event.meta or await self.dag_store.load_meta(event.execution_id)
                if meta is not None:
                    await self.checkpoints.write_header(meta)
            elif event.name == "execution.finalized":
                await self.write_snapshot(event.execution_id, event.view)
        except ResolverError as exc:
            log.error("snapshot.unresolvable_result %s", exc, extra={"execution_id": event.execution_id})
        except Exception:  # an observer must never crash the engine's worker
            log.exception(
                "snapshot.write_failed", extra={"event": event.name, "execution_id": event.execution_id}
            )

    async def write_snapshot(
        self, execution_id: str, view: ExecutionView | None = None
    ) -> TerminalSnapshot | None:
        """The terminal snapshot (written now, or the one written before); None while not
        terminal. `view`: the terminal execution, when the caller read it already."""
        view = view or await self.dag_store.read_execution(execution_id)
        if view is None or not ExecutionStatus(view.meta.status).is_terminal:
            return None
        stored = await stored_results(view, self.resolver)
        snapshot = TerminalSnapshot(
            execution_id=execution_id,
            tenant_id=tenant_of(view.meta.snapshot),
            pipeline_name=view.meta.pipeline.name,
            pipeline_version=view.meta.pipeline.version,
            status=view.meta.status,
            snapshot=document_json(view, stored),
            # The view the document describes is this view with the stored results it holds:
            # fingerprinted as it is, not rebuilt from the document (9,000 step views, and
            # their stored forms looked up again, at the end of a wide run).
            fingerprint=await fingerprint_view(view, self.resolver, stored),
        )
        if not await self.store.put_snapshot(snapshot):
            return await self.store.get_snapshot(execution_id, snapshot.tenant_id)
        if self.metrics is not None:
            self.metrics.snapshots_written.inc()
        return snapshot
