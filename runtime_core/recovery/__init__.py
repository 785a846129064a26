"""Runtime health and execution recovery: what happens when a runtime instance dies.

Owns the health reconciler (a heartbeat older than the window marks an instance Unsafe, so
admission stops offering it at once) and, separately, the execution recovery reconciler
(the assigned work of dead incarnations - an Unsafe instance, or the predecessors a new
incarnation of the same instance id superseded - enumerated from the run-execution index
and the shared run store, goes back to tenant-visible replacement capacity exactly once: in-flight
executions resume with the same ExecutionId, local-queued runs are redispatched with the
same SharedRunId and a new LocalRunId, recovery never consumes retry budget), their Lua
transitions, the recovery forensics and ledger evidence, the report of what recovery did to
each run (`RecoveryReports`: incidents, outcomes, timings, uncertain calls and how they were
settled, read back from that evidence per tenant), and the background loops. Must not
dispatch, create capacity, or read a dead instance's local queue.
"""

from runtime_core.recovery._archive import DurableSnapshots, ExecutionArchive
from runtime_core.recovery._claims import ItemClaimOutcome, RecoveryClaims
from runtime_core.recovery._dag_release import release_execution_claims
from runtime_core.recovery._evidence import RecoveryEvidence
from runtime_core.recovery._health import RuntimeHealthReconciler
from runtime_core.recovery._health_store import (
    DeadIncarnations,
    InstanceHealthStore,
    InstanceHeartbeat,
    RecoveredMarkOutcome,
    UnsafeMarkOutcome,
)
from runtime_core.recovery._loops import RecoveryLoops
from runtime_core.recovery._models import (
    DEFAULT_FENCE_RETENTION_MS,
    DEFAULT_HEALTH_WINDOW_MS,
    RecoveredItem,
    RecoveryAction,
    RecoveryCause,
    RecoveryKind,
    RecoverySettings,
)
from runtime_core.recovery._reconciler import ExecutionRecoveryReconciler, RecoveryDependencies
from runtime_core.recovery._report import RecoveryReports
from runtime_core.recovery._report_models import (
    RecoveryIncident,
    RecoveryReport,
    ReportCounts,
    ReportedOperation,
    ReportedRun,
    RunOutcome,
)
from runtime_core.recovery._requeue import RunRecovery, RunRecoveryOutcome, SharedRunRecovery

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Reconcilers
    "RuntimeHealthReconciler",
    "ExecutionRecoveryReconciler",
    "RecoveryDependencies",
    "RecoverySettings",
    "RecoveryLoops",
    "DEFAULT_FENCE_RETENTION_MS",
    "DEFAULT_HEALTH_WINDOW_MS",
    # Results and evidence
    "RecoveredItem",
    "RecoveryKind",
    "RecoveryAction",
    "RecoveryCause",
    "RecoveryEvidence",
    "ExecutionArchive",
    "DurableSnapshots",
    # The recovery report
    "RecoveryReports",
    "RecoveryReport",
    "RecoveryIncident",
    "ReportedRun",
    "ReportedOperation",
    "ReportCounts",
    "RunOutcome",
    # Health marks
    "InstanceHealthStore",
    "InstanceHeartbeat",
    "DeadIncarnations",
    "UnsafeMarkOutcome",
    "RecoveredMarkOutcome",
    # Exactly-once transitions
    "RecoveryClaims",
    "ItemClaimOutcome",
    "SharedRunRecovery",
    "RunRecovery",
    "RunRecoveryOutcome",
    "release_execution_claims",
]
