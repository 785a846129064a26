"""Recovery evidence: one forensics record and one ledger entry per recovered item, and the
report of each recovery pass.

Owns turning a RecoveredItem into `ForensicsRecorder.record(...)` and a
`runtime.recovery.<action>` LedgerEntry, both carrying the tenant of the item's stored
snapshot and the unsafe runtime instance's id; and, once a pass over a dead incarnation
recovered something, one `recovery.report` ledger entry per tenant it touched (the
runs, counts per outcome, calls left uncertain, the time from death to recovery) and one
`recovery.report` structured log event. Without an audit store (bare control planes in tests)
nothing is written but the log event. Must not recover anything itself.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict

from runtime_core.audit import ForensicsRecorder, LedgerRecorder
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.recovery._models import RecoveredItem
from runtime_core.storage import LedgerEntry

REPORT_EVENT = "recovery.report"
log = logging.getLogger("runtime_core.recovery")


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

    async def report_pass(self, runtime_instance_id: str, items: list[RecoveredItem], now_ms: int) -> None:
        """One `recovery.report` ledger entry per tenant and one `recovery.report` log event."""
        by_tenant: dict[str, list[RecoveredItem]] = defaultdict(list)
        for item in items:
            by_tenant[item.tenant_id].append(item)
        for tenant_id, recovered in sorted(by_tenant.items()):
            summary = _pass_summary(recovered, now_ms)
            log.warning(
                "recovery.report runtime_instance_id=%s tenant_id=%s runs=%d uncertain=%d",
                runtime_instance_id,
                tenant_id,
                len(recovered),
                summary["counts"]["uncertain"],
                extra={"runtime_instance_id": runtime_instance_id, "tenant_id": tenant_id, **summary},
            )
            if self.ledger is not None:
                entry = LedgerEntry(
                    tenant_id=tenant_id,
                    runtime_instance_id=runtime_instance_id,
                    event=REPORT_EVENT,
                    attributes={**summary, "reconciler_id": self.reconciler_id},
                )
                await self.ledger.append(entry, flush=True)


def _pass_summary(items: list[RecoveredItem], now_ms: int) -> dict[str, object]:
    actions = Counter(item.action.value for item in items)
    dead_since = min((item.dead_since_ms for item in items if item.dead_since_ms), default=None)
    return {
        "cause": items[0].cause.value if items[0].cause else None,
        "incarnations": sorted({item.incarnation for item in items}),
        "counts": {
            **actions,
            "runs": len(items),
            "uncertain": sum(len(i.uncertain_operations) for i in items),
        },
        "recovery_ms": now_ms - dead_since if dead_since else None,
        "runs": [
            {
                "shared_run_id": item.shared_run_id,
                "execution_id": item.execution_id,
                "action": item.action.value,
                "uncertain_operations": item.uncertain_operations,
            }
            for item in items
        ],
    }
