"""LifecycleSettings: how long a finished run's state stays in Redis and in the durable store.

Owns the two retention settings: `HotStateRetention` (the grace after which a finished run's
execution keys leave Redis, the retention of its hot records, the sweeper's cadence) and
`DurableRetention` (per record kind, how many days the durable store keeps it, and the
purge cadence), both readable from the environment. Must not act on them.
"""

from __future__ import annotations

import os
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.storage import DurableRecordKind

DAY_MS = 86_400_000
# Written instead of a number of days: never purge that record kind.
KEEP_FOREVER = "forever"


class HotStateRetention(BaseModel):
    """What happens in Redis once a run finished.

    After `grace_ms` (and once its run record, terminal snapshot, ledger and trace are durable)
    the execution's keys are dropped and the run leaves the live listings; its shared-run,
    run-index and dispatch-attempt records then expire after `record_retention_ms`.
    `evidence_wait_ms`: how long the sweeper waits for a finished run's ledger and trace to
    become durable (a process that died before flushing never writes them) before it archives
    the run anyway, with a warning. `enabled=False` keeps the background sweeper from
    starting (finished runs then stay in Redis until something sweeps).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    grace_ms: int = Field(default=60_000, ge=0)
    record_retention_ms: int = Field(default=600_000, ge=1)
    sweep_interval_ms: int = Field(default=1_000, ge=10)
    sweep_batch: int = Field(default=200, ge=1)
    claim_lease_ms: int = Field(default=30_000, ge=100)
    evidence_wait_ms: int = Field(default=120_000, ge=0)


class DurableRetention(BaseModel):
    """Days each durable record kind is kept (None: forever), purged in the background.

    Snapshots carry their executions' payloads and archived steps (the replay material);
    run records carry the run-index history. Keep snapshots at least as long as run records:
    an archived run's result is read through its snapshot's payloads.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ledger_days: float | None = Field(default=30, gt=0)
    trace_days: float | None = Field(default=7, gt=0)
    forensics_days: float | None = Field(default=90, gt=0)
    snapshot_days: float | None = Field(default=30, gt=0)
    run_record_days: float | None = Field(default=30, gt=0)
    purge_interval_ms: int = Field(default=3_600_000, ge=10)
    purge_batch: int = Field(default=1_000, ge=1)

    def windows(self) -> dict[DurableRecordKind, timedelta]:
        """The record kinds that expire, with their window."""
        days = {
            DurableRecordKind.LEDGER: self.ledger_days,
            DurableRecordKind.TRACE: self.trace_days,
            DurableRecordKind.FORENSICS: self.forensics_days,
            DurableRecordKind.SNAPSHOTS: self.snapshot_days,
            DurableRecordKind.RUN_RECORDS: self.run_record_days,
        }
        return {kind: timedelta(days=value) for kind, value in days.items() if value is not None}


_HOT_ENV = {
    "grace_ms": "MCP_RUNTIME_HOT_GRACE_MS",
    "record_retention_ms": "MCP_RUNTIME_HOT_RECORD_RETENTION_MS",
}
_DURABLE_ENV = {
    "ledger_days": "MCP_RUNTIME_RETENTION_LEDGER_DAYS",
    "trace_days": "MCP_RUNTIME_RETENTION_TRACE_DAYS",
    "forensics_days": "MCP_RUNTIME_RETENTION_FORENSICS_DAYS",
    "snapshot_days": "MCP_RUNTIME_RETENTION_SNAPSHOT_DAYS",
    "run_record_days": "MCP_RUNTIME_RETENTION_RUN_RECORD_DAYS",
}


def _from_env(names: dict[str, str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for field, variable in names.items():
        raw = os.environ.get(variable, "").strip()
        if raw:
            values[field] = None if raw.lower() == KEEP_FOREVER else raw
    return values


class LifecycleSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    hot: HotStateRetention = Field(default_factory=HotStateRetention)
    durable: DurableRetention = Field(default_factory=DurableRetention)

    @classmethod
    def from_env(cls) -> LifecycleSettings:
        """Defaults overridden by MCP_RUNTIME_HOT_* and MCP_RUNTIME_RETENTION_*_DAYS (or `forever`)."""
        return cls(
            hot=HotStateRetention.model_validate(_from_env(_HOT_ENV)),
            durable=DurableRetention.model_validate(_from_env(_DURABLE_ENV)),
        )
