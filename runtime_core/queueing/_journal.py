"""Ledger evidence of the shared-run lifecycle: submitted, queued, dispatched, requeued, ...

Owns turning a shared-run transition into one `shared_run.<event>` LedgerEntry that carries
the tenant of the run's stored snapshot (never anything else) and its identities. Entries
are buffered by the LedgerRecorder (queries flush first). Without an audit store (bare
control planes in tests) nothing is written. Must not change any state.
"""

from __future__ import annotations

from runtime_core.audit import LedgerRecorder
from runtime_core.queueing._models import SharedRunRecord
from runtime_core.storage import LedgerEntry


class SharedRunJournal:
    def __init__(self, ledger: LedgerRecorder | None = None) -> None:
        self.ledger = ledger

    async def record(
        self,
        run: SharedRunRecord,
        event: str,
        *,
        local_run_id: str | None = None,
        assigned_runtime_instance_id: str | None = None,
        **attributes: str,
    ) -> None:
        if self.ledger is None or run.snapshot is None:
            return
        entry = LedgerEntry(
            tenant_id=run.snapshot.tenant_id,
            shared_run_id=run.shared_run_id,
            local_run_id=local_run_id,
            assigned_runtime_instance_id=assigned_runtime_instance_id,
            runtime_instance_id=attributes.get("pump.runtime.instance.id"),
            event=f"shared_run.{event}",
            attributes={"submit.mode": run.submit_mode.value, "user.id": run.snapshot.user_id, **attributes},
        )
        await self.ledger.append(entry)
