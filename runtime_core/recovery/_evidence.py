"""Recovery evidence: one forensics record and one ledger entry per recovered item.

Owns turning a RecoveredItem into `ForensicsRecorder.record(...)` and a
`runtime.recovery.<action>` LedgerEntry, both carrying the tenant of the item's stored
snapshot and the unsafe runtime instance's id. Without an audit store (bare control planes
in tests) nothing is written. Must not recover anything itself.
"""

from __future__ import annotations

from runtime_core.audit import ForensicsRecorder, LedgerRecorder
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.recovery._models import RecoveredItem
from runtime_core.storage import LedgerEntry


class RecoveryEvidence:
    def __init__(
        self,
        forensics: ForensicsRecorder | None = None,
        ledger: LedgerRecorder | None = None,
        *,
        reconciler_id: str = "recovery-reconciler",
    ) -> None:
        self.forensics = forensics
        self.ledger = ledger
        self.reconciler_id = reconciler_id

    async def record(self, item: RecoveredItem, snapshot: ExecutionContextSnapshot) -> None:
        detail = item.model_dump(mode="json", exclude={"runtime_instance_id", "tenant_id", "kind", "action"})
        detail["reconciler_id"] = self.reconciler_id
        if self.forensics is not None:
            await self.forensics.record(
                snapshot,
                runtime_instance_id=item.runtime_instance_id,
                kind=item.kind.value,
                action=item.action.value,
                execution_id=item.execution_id,
                shared_run_id=item.shared_run_id,
                detail=detail,
            )
        if self.ledger is not None:
            entry = LedgerEntry(
                tenant_id=snapshot.tenant_id,
                execution_id=item.execution_id,
                shared_run_id=item.shared_run_id,
                local_run_id=item.local_run_id,
                runtime_instance_id=item.runtime_instance_id,
                assigned_runtime_instance_id=item.runtime_instance_id,
                event=item.action.ledger_event,
                attributes={"kind": item.kind.value, **detail},
            )
            await self.ledger.append(entry, flush=True)
