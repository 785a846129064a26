"""The recovery report's shape: incidents, the runs recovery touched in each, and their counts.

Owns the models `recovery.report` answers with (and the ledger entry / log event of a recovery
pass summarizes): an incident is one dead incarnation of a runtime instance (`instance_lost`:
it stopped heartbeating; `process_restarted`: a new incarnation of the same instance id took
over) or a lost Redis dataset (`hot_state_lost`); each run says what recovery did to it
(`resumed` on the same ExecutionId, `redispatched` under the same SharedRunId, `restored` from
its durable copy, `failed_lost`), its timings, and the calls to peers that were uncertain and
how each was settled. Must not hold behaviour beyond derived fields.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class RunOutcome(StrEnum):
    RESUMED = "resumed"
    REDISPATCHED = "redispatched"
    RESTORED = "restored"
    FAILED_LOST = "failed_lost"


class ReportedOperation(BaseModel):
    """A call to a peer that may have taken effect when its process died."""

    model_config = ConfigDict(frozen=True)

    step: str
    operation: str
    operation_id: str
    policy: str | None = Field(None, description="The step's onUncertain policy, once the step ran again.")
    settled_by: str | None = Field(
        None, description="retried, reconciled_found / _not_found, failed, human_*; None: not settled yet."
    )
    settled_at: datetime | None = None


class ReportedRun(BaseModel):
    model_config = ConfigDict(frozen=True)

    shared_run_id: str | None = None
    execution_id: str | None = None
    local_run_id: str | None = Field(None, description="The local run that died with its incarnation.")
    outcome: RunOutcome
    via: str = Field(description="What recovery did exactly (the forensics action).")
    reason: str = ""
    recovered_at: datetime
    resumed_at: datetime | None = Field(None, description="When a replacement took the execution over.")
    finished_at: datetime | None = None
    final_status: str | None = Field(None, description="Completed / Failed / Cancelled, once it ended.")
    uncertain: list[ReportedOperation] = Field(default_factory=list)


class ReportCounts(BaseModel):
    model_config = ConfigDict(frozen=True)

    runs: int = 0
    resumed: int = 0
    redispatched: int = 0
    restored: int = 0
    failed_lost: int = 0
    uncertain: int = 0
    settled: int = 0
    completed: int = 0
    failed: int = 0

    @classmethod
    def of(cls, runs: list[ReportedRun]) -> ReportCounts:
        operations = [op for run in runs for op in run.uncertain]
        return cls(
            runs=len(runs),
            **{outcome.value: sum(run.outcome is outcome for run in runs) for outcome in RunOutcome},
            uncertain=len(operations),
            settled=sum(op.settled_by is not None for op in operations),
            completed=sum(run.final_status == "Completed" for run in runs),
            failed=sum(run.final_status == "Failed" for run in runs),
        )

    def __add__(self, other: ReportCounts) -> ReportCounts:
        return ReportCounts(
            **{name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields}
        )


class RecoveryIncident(BaseModel):
    model_config = ConfigDict(frozen=True)

    cause: str = Field(description="instance_lost, process_restarted or hot_state_lost.")
    runtime_instance_id: str | None = None
    incarnation: str | None = None
    dead_since: datetime | None = Field(None, description="When the incarnation was judged dead.")
    first_recovered_at: datetime
    last_recovered_at: datetime
    recovery_ms: int | None = Field(None, description="From dead_since to the last run recovered.")
    counts: ReportCounts
    runs: list[ReportedRun]


class RecoveryReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant_id: str
    incidents: list[RecoveryIncident] = Field(description="Most recent first.")
    counts: ReportCounts
