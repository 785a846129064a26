"""Shared queueing: shared runs, the global shared queue, the pump and dispatch-time admission.

Owns the Redis shared run store and shared queue (Lua: shared_enqueue, shared_claim_next,
shared_mark_dispatched, shared_requeue, shared_cancel, shared_run_transition), submit modes
(QueueFirst, DirectDispatch), idempotent submit (a key claimed atomically with the run's
creation), the journal of shared-run transitions (ledger + run events), the dispatcher
(claim -> load -> restore snapshot -> re-admit -> reserve -> provider dispatch -> mark
Dispatched), the pump cycle, the readiness gate and background pump, scale-out requests,
the watcher and the fulfilled-run requeue. Must not execute steps or mutate DAG state.
"""

from runtime_core.queueing._background import BackgroundPump, ReadinessGate
from runtime_core.queueing._controller import (
    DirectAdmission,
    InputCheck,
    PipelineValidator,
    SharedRuntimeController,
    SubmitResult,
    TenantPipelineCheck,
)
from runtime_core.queueing._delivery import DEFAULT_RESERVATION_TTL_MS, Delivery, RunDelivery
from runtime_core.queueing._dispatcher import DispatchCycle, SharedQueueDispatcher
from runtime_core.queueing._idempotency import (
    DEFAULT_IDEMPOTENCY_WINDOW_MS,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    IdempotencyConflictError,
    IdempotencyKey,
    IdempotentRunGoneError,
    request_fingerprint,
)
from runtime_core.queueing._journal import SharedRunJournal
from runtime_core.queueing._keys import (
    SHARED_QUEUE_TAG,
    QueuePartition,
    SharedQueueKeys,
    adopt_recorded_partitions,
)
from runtime_core.queueing._models import (
    DispatchOutcome,
    DispatchResult,
    PumpIdentity,
    PumpRequest,
    PumpResult,
    PumpStopReason,
    QueueClaim,
    QueueItem,
    QueueItemStatus,
    SharedRunRecord,
    SharedRunStatus,
    SharedRunSummary,
    SubmitMode,
)
from runtime_core.queueing._pump import PumpProgress, SharedQueuePump
from runtime_core.queueing._queue import DEFAULT_CLAIM_LEASE_MS, QueueOutcome, QueueTransition, SharedQueue
from runtime_core.queueing._queue_reads import PendingGroup
from runtime_core.queueing._requeue import FulfilledRunRequeue
from runtime_core.queueing._run_store import (
    ListingPosition,
    RetireOutcome,
    RunTransition,
    SharedRunStore,
    TransitionOutcome,
)
from runtime_core.queueing._scale_out import (
    ScaleOutRequestRecord,
    ScaleOutRequestStore,
    ScaleOutStatus,
    new_scale_out_request_id,
)
from runtime_core.queueing._turns import ClaimTurn, PartitionTurns
from runtime_core.queueing._watcher import ScaleOutWatcher

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Shared runs and submit
    "SharedRuntimeController",
    "DirectAdmission",
    "InputCheck",
    "SubmitResult",
    "SubmitMode",
    "PipelineValidator",
    "TenantPipelineCheck",
    "SharedRunStore",
    "SharedRunRecord",
    "SharedRunStatus",
    "SharedRunSummary",
    "RunTransition",
    "TransitionOutcome",
    "RetireOutcome",
    "ListingPosition",
    # Idempotent submit
    "IdempotencyKey",
    "IdempotencyConflictError",
    "IdempotentRunGoneError",
    "request_fingerprint",
    "DEFAULT_IDEMPOTENCY_WINDOW_MS",
    "MAX_IDEMPOTENCY_KEY_LENGTH",
    # Shared queue
    "SharedQueue",
    "PendingGroup",
    "SharedQueueKeys",
    "PartitionTurns",
    "ClaimTurn",
    "QueuePartition",
    "adopt_recorded_partitions",
    "SHARED_QUEUE_TAG",
    "QueueItem",
    "QueueItemStatus",
    "QueueClaim",
    "QueueOutcome",
    "QueueTransition",
    "DEFAULT_CLAIM_LEASE_MS",
    # Dispatch and pump
    "SharedQueueDispatcher",
    "SharedRunJournal",
    "RunDelivery",
    "Delivery",
    "DEFAULT_RESERVATION_TTL_MS",
    "DispatchCycle",
    "DispatchOutcome",
    "DispatchResult",
    "SharedQueuePump",
    "PumpIdentity",
    "PumpRequest",
    "PumpResult",
    "PumpStopReason",
    "PumpProgress",
    "ReadinessGate",
    "BackgroundPump",
    # Scale-out
    "ScaleOutRequestStore",
    "ScaleOutRequestRecord",
    "ScaleOutStatus",
    "ScaleOutWatcher",
    "FulfilledRunRequeue",
    "new_scale_out_request_id",
]
