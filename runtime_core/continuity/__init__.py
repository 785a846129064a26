"""Hot-state continuity: what the runtime does when Redis lost the dataset it worked in.

Owns the restorer runtime instances call after the dataset epoch changed under a live run
(its shared run record is recreated as dispatched to that run; its execution is restored from
its durable copy: the terminal snapshot, or the header and archived steps written as it ran)
and the control plane's dataset watch (detects the change, logs it, re-publishes what the
control plane itself keeps in Redis), and the durable copies of submitted runs from which
the runs that were only queued are queued again. Must not run executions, nor requeue a run
that left the queue: its instance restores it, or it had ended.
"""

from runtime_core.continuity._evidence import (
    FAILED_LOST,
    HOT_STATE_LOST_KIND,
    REQUEUED,
    RESTORED,
    LostRunEvidence,
)
from runtime_core.continuity._queued_runs import (
    HOT_STATE_LOST_REQUEUE_REASON,
    LostRunOutcome,
    QueuedRunCopies,
)
from runtime_core.continuity._restorer import HotStateContinuity
from runtime_core.continuity._watch import DatasetWatch

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Instances' restorer
    "HotStateContinuity",
    # Control plane's watch and the requeue of runs that were only queued
    "DatasetWatch",
    "QueuedRunCopies",
    "LostRunOutcome",
    "HOT_STATE_LOST_REQUEUE_REASON",
    # Durable evidence for the recovery report
    "LostRunEvidence",
    "HOT_STATE_LOST_KIND",
    "RESTORED",
    "REQUEUED",
    "FAILED_LOST",
]
