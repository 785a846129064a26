"""ForensicsRecorder: what recovery did with in-flight executions and local-queued runs.

Owns the one call the recovery reconciler makes per recovered item; the tenant always comes
from the recovered item's stored snapshot. Writes immediately (recovery is rare and its
evidence must survive the next crash). Must not recover anything itself.
"""

from __future__ import annotations

from typing import Any

from runtime_core.audit._metrics import RuntimeMetrics
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.storage import DurableStore, ForensicsRecord


class ForensicsRecorder:
    def __init__(self, store: DurableStore, metrics: RuntimeMetrics | None = None) -> None:
        self.store = store
        self.metrics = metrics

    async def record(
        self,
        snapshot: ExecutionContextSnapshot,
        *,
        runtime_instance_id: str,
        kind: str,
        action: str,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> ForensicsRecord:
        """Persist one record, e.g. kind `in_flight_execution`, action `requeued_same_execution_id`."""
        record = ForensicsRecord(
            tenant_id=snapshot.tenant_id,
            runtime_instance_id=runtime_instance_id,
            shared_run_id=shared_run_id,
            execution_id=execution_id,
            kind=kind,
            action=action,
            detail=detail or {},
        )
        await self.store.put_forensics(record)
        if self.metrics is not None:
            self.metrics.recovery_recorded(kind)
        return record
