"""Durable evidence of what continuity did to a run after Redis lost its dataset.

Owns the one forensics record per run (kind `HotStateLost`, the tenant of the run's snapshot):
`restored` (its execution rebuilt from its durable copy), `failed_lost` (no copy could restore
it) or `requeued` (it was only queued: queued again under its SharedRunId), with the new
dataset's epoch that groups them into one incident of the recovery report. Without an audit
store nothing is written. Must not restore or requeue anything itself.
"""

from __future__ import annotations

import logging
from typing import Any

from runtime_core.audit import ForensicsRecorder
from runtime_core.identity import ExecutionContextSnapshot

HOT_STATE_LOST_KIND = "HotStateLost"
RESTORED, FAILED_LOST, REQUEUED = "restored", "failed_lost", "requeued"
log = logging.getLogger("runtime_core.continuity")


class LostRunEvidence:
    def __init__(self, forensics: ForensicsRecorder | None) -> None:
        self.forensics = forensics

    async def record(
        self,
        snapshot: ExecutionContextSnapshot,
        action: str,
        *,
        epoch: str,
        runtime_instance_id: str,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        **detail: Any,
    ) -> None:
        if self.forensics is None:
            return
        try:
            await self.forensics.record(
                snapshot,
                runtime_instance_id=runtime_instance_id,
                kind=HOT_STATE_LOST_KIND,
                action=action,
                execution_id=execution_id,
                shared_run_id=shared_run_id,
                detail={"epoch": epoch, **detail},
            )
        except Exception:  # the run goes on: only its evidence is missing
            log.exception(
                "hot_state.evidence_not_written",
                extra={
                    "execution_id": execution_id,
                    "shared_run_id": shared_run_id,
                    "tenant_id": snapshot.tenant_id,
                },
            )
