"""Hot-state continuity: what the runtime does when Redis lost the dataset it worked in.

Owns the restorer runtime instances call after the dataset epoch changed under a live run
(its shared run record is recreated as dispatched to that run; its execution is restored from
its durable copy: the terminal snapshot, or the header and archived steps written as it ran)
and the control plane's dataset watch (detects the change, logs it, re-publishes what the
control plane itself keeps in Redis). Must not run executions, nor guess a run it does not
hold: runs that were only queued when the dataset was lost are not known to any process.
"""

from runtime_core.continuity._restorer import HotStateContinuity
from runtime_core.continuity._watch import DatasetWatch

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Instances' restorer
    "HotStateContinuity",
    # Control plane's watch
    "DatasetWatch",
]
