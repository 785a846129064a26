"""Models of runtime health and execution recovery.

Owns the recovery settings, the kinds of recovered work (InFlightExecution, LocalQueued),
what recovery did with an item (its action) and the per-item result the reconciler reports
and records as forensics. Must not hold behaviour beyond derived fields.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_HEALTH_WINDOW_MS = 10_000
DEFAULT_RECOVERY_CLAIM_LEASE_MS = 30_000
DEFAULT_RECOVERED_RETENTION_MS = 3_600_000
DEFAULT_FENCE_RETENTION_MS = 86_400_000


class RecoverySettings(BaseModel):
    """Health window, item-claim lease, retention of Recovered records and the reconciler's id.

    `predecessor_grace_ms`: how long a superseded incarnation stays recorded after its work was
    taken over, so a dispatch it accepted in flight (reserved before it was superseded) is
    still found and recovered. `fence_retention_ms`: how long an ExecutionId given up before its
    DAG existed stays refused (a zombie frozen between recording it and creating the DAG).
    """

    model_config = ConfigDict(frozen=True)

    health_window_ms: int = Field(default=DEFAULT_HEALTH_WINDOW_MS, ge=1)
    claim_lease_ms: int = Field(default=DEFAULT_RECOVERY_CLAIM_LEASE_MS, ge=100)
    predecessor_grace_ms: int = Field(default=DEFAULT_RECOVERY_CLAIM_LEASE_MS, ge=0)
    recovered_retention_ms: int = Field(default=DEFAULT_RECOVERED_RETENTION_MS, ge=1_000)
    fence_retention_ms: int = Field(default=DEFAULT_FENCE_RETENTION_MS, ge=1)
    reconciler_id: str = "recovery-reconciler"


class RecoveryKind(StrEnum):
    """An ExecutionId exists (resume it) or the run never started executing (redispatch it)."""

    IN_FLIGHT_EXECUTION = "InFlightExecution"
    LOCAL_QUEUED = "LocalQueued"


class RecoveryAction(StrEnum):
    REQUEUED_FOR_RESUME = "requeued_for_resume"
    REQUEUED_FOR_REDISPATCH = "requeued_for_redispatch"
    SCALE_OUT_REQUESTED = "scale_out_requested"
    ABANDONED = "abandoned"

    @property
    def ledger_event(self) -> str:
        return f"runtime.recovery.{self.value}"


class RecoveryCause(StrEnum):
    """Why the work was recovered: its instance was lost (Unsafe), or its process restarted (a new
    incarnation of the same instance id superseded the one that held the work)."""

    INSTANCE_LOST = "instance_lost"
    PROCESS_RESTARTED = "process_restarted"


class RecoveredItem(BaseModel):
    """One local run of a dead incarnation of a runtime instance, and what recovery did with it.

    `dead_since_ms`: when the incarnation was judged dead (its claims were made before);
    `uncertain_operations`: the calls to peers its released steps had in flight (`step`,
    `operation`, `operation_id`, `state`), settled by each step's policy when it runs again.
    """

    runtime_instance_id: str
    incarnation: str = ""
    tenant_id: str
    kind: RecoveryKind
    action: RecoveryAction
    local_run_id: str
    shared_run_id: str | None = None
    execution_id: str | None = None
    released_steps: list[str] = Field(default_factory=list)
    admission_decision: str | None = None
    scale_out_request_id: str | None = None
    reason: str = ""
    cause: RecoveryCause | None = None
    dead_since_ms: int | None = None
    uncertain_operations: list[dict[str, str]] = Field(default_factory=list)
