"""RecoveryReports: what recovery did to each of a tenant's runs, read back from durable evidence.

Owns assembling the recovery report from the forensics records recovery and hot-state
continuity wrote (one per run they touched, each naming its incident: a dead incarnation of a
runtime instance, or a lost Redis dataset by its epoch) and, per run, its ledger: when a
replacement took the execution over, how it ended, and every call found uncertain with how its
policy settled it. Every read goes through the tenant-scoped audit queries: another tenant's
runs are never seen. Must not recover anything nor write evidence (`RecoveryEvidence` does).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from runtime_core.audit import AuditQueries
from runtime_core.continuity import FAILED_LOST, HOT_STATE_LOST_KIND, REQUEUED, RESTORED
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.recovery._models import RecoveryAction, RecoveryCause, RecoveryKind
from runtime_core.recovery._report_models import (
    RecoveryIncident,
    RecoveryReport,
    ReportCounts,
    ReportedOperation,
    ReportedRun,
    RunOutcome,
)
from runtime_core.storage import ForensicsRecord, LedgerEntry

HOT_STATE_LOST_CAUSE = "hot_state_lost"
DEFAULT_MAX_INCIDENTS = 20
_RUN_LEDGER_LIMIT = 10_000
_RECOVERY_KINDS = frozenset({RecoveryKind.IN_FLIGHT_EXECUTION.value, RecoveryKind.LOCAL_QUEUED.value})
_OUTCOMES = {
    RecoveryAction.REQUEUED_FOR_RESUME.value: RunOutcome.RESUMED,
    RecoveryAction.REQUEUED_FOR_REDISPATCH.value: RunOutcome.REDISPATCHED,
    RecoveryAction.ABANDONED.value: RunOutcome.FAILED_LOST,
    RESTORED: RunOutcome.RESTORED,
    REQUEUED: RunOutcome.REDISPATCHED,
    FAILED_LOST: RunOutcome.FAILED_LOST,
}

IncidentKey = tuple[str, str | None, str | None]


class RecoveryReports:
    def __init__(self, queries: AuditQueries) -> None:
        self.queries = queries

    async def report(
        self,
        snapshot: ExecutionContextSnapshot,
        *,
        since: datetime | None = None,
        runtime_instance_id: str | None = None,
        max_incidents: int = DEFAULT_MAX_INCIDENTS,
    ) -> RecoveryReport:
        """The caller's tenant's recovery incidents (most recent first, at most `max_incidents`)."""
        records = await self.queries.forensics(snapshot, runtime_instance_id=runtime_instance_id)
        groups: dict[IncidentKey, list[ForensicsRecord]] = defaultdict(list)
        for record in records:
            if _relevant(record) and (since is None or record.recorded_at >= since):
                groups[_incident_key(record)].append(record)
        latest_first = sorted(groups.items(), key=lambda item: item[1][-1].recorded_at, reverse=True)
        incidents = [
            await self._incident(snapshot, key, group) for key, group in latest_first[:max_incidents]
        ]
        counts = sum((incident.counts for incident in incidents), ReportCounts())
        return RecoveryReport(tenant_id=snapshot.tenant_id, incidents=incidents, counts=counts)

    async def _incident(
        self, snapshot: ExecutionContextSnapshot, key: IncidentKey, records: list[ForensicsRecord]
    ) -> RecoveryIncident:
        cause, runtime_instance_id, incarnation = key
        runs = [await self._run(snapshot, record) for record in records]
        dead_since_ms = min(
            (r.detail["dead_since_ms"] for r in records if r.detail.get("dead_since_ms")), default=None
        )
        dead_since = _at(dead_since_ms) if dead_since_ms else None
        first, last = records[0].recorded_at, records[-1].recorded_at
        return RecoveryIncident(
            cause=cause,
            runtime_instance_id=runtime_instance_id if cause != HOT_STATE_LOST_CAUSE else None,
            incarnation=incarnation if cause != HOT_STATE_LOST_CAUSE else None,
            dead_since=dead_since,
            first_recovered_at=first,
            last_recovered_at=last,
            recovery_ms=_ms_between(dead_since, last) if dead_since else None,
            counts=ReportCounts.of(runs),
            runs=runs,
        )

    async def _run(self, snapshot: ExecutionContextSnapshot, record: ForensicsRecord) -> ReportedRun:
        detail = record.detail
        entries = []
        if record.execution_id:
            entries = await self.queries.ledger(
                snapshot, execution_id=record.execution_id, limit=_RUN_LEDGER_LIMIT
            )
        after = [entry for entry in entries if entry.recorded_at >= record.recorded_at]
        finished = _first(after, "execution.finalized")
        resumed = _first(after, "execution.reassigned")
        return ReportedRun(
            shared_run_id=record.shared_run_id,
            execution_id=record.execution_id,
            local_run_id=detail.get("local_run_id"),
            outcome=_outcome(record),
            via=record.action,
            reason=str(detail.get("reason", "")),
            recovered_at=record.recorded_at,
            resumed_at=resumed.recorded_at if resumed else None,
            finished_at=finished.recorded_at if finished else None,
            final_status=finished.attributes.get("status") if finished else None,
            uncertain=_uncertain(after),
        )


def _relevant(record: ForensicsRecord) -> bool:
    return record.kind in _RECOVERY_KINDS or record.kind == HOT_STATE_LOST_KIND


def _incident_key(record: ForensicsRecord) -> IncidentKey:
    if record.kind == HOT_STATE_LOST_KIND:
        return HOT_STATE_LOST_CAUSE, None, str(record.detail.get("epoch") or "")
    cause = record.detail.get("cause") or RecoveryCause.INSTANCE_LOST.value
    return str(cause), record.runtime_instance_id, record.detail.get("incarnation")


def _outcome(record: ForensicsRecord) -> RunOutcome:
    if record.action == RecoveryAction.SCALE_OUT_REQUESTED.value:
        resumed = record.kind == RecoveryKind.IN_FLIGHT_EXECUTION.value
        return RunOutcome.RESUMED if resumed else RunOutcome.REDISPATCHED
    return _OUTCOMES.get(record.action, RunOutcome.FAILED_LOST)


def _uncertain(entries: list[LedgerEntry]) -> list[ReportedOperation]:
    """Each call found uncertain after the recovery, with its first settlement since."""
    found: list[ReportedOperation] = []
    for index, entry in enumerate(entries):
        if entry.event != "step.operation_uncertain":
            continue
        operation_id = entry.attributes.get("operation_id", "")
        settled = next(
            (
                later
                for later in entries[index + 1 :]
                if later.event == "step.operation_settled"
                and later.attributes.get("operation_id") == operation_id
            ),
            None,
        )
        found.append(
            ReportedOperation(
                step=entry.step_name or "",
                operation=str(entry.attributes.get("operation", "")),
                operation_id=str(operation_id),
                policy=entry.attributes.get("policy"),
                settled_by=settled.attributes.get("settled_by") if settled else None,
                settled_at=settled.recorded_at if settled else None,
            )
        )
    return found


def _first(entries: list[LedgerEntry], event: str) -> LedgerEntry | None:
    return next((entry for entry in entries if entry.event == event), None)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _ms_between(start: datetime, end: datetime) -> int:
    return max(0, int((end - start).total_seconds() * 1000))
