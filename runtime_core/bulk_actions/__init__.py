"""Dead letters and bulk actions: failed runs explained, retried or cancelled in bulk.

Owns listing the runs that failed after their retries (the failed step, its last error and
attempts, the run that retried it), retrying failed runs as new runs linked to the originals
in both ledgers (idempotent: one retry per original), and cancelling runs, by ids or by a
filter of the caller's tenant's runs, refused whole above a per-call limit. Every run is read
and acted on through the ControlPlane, tenant-checked. Must not dispatch or execute.
"""

from runtime_core.bulk_actions._actions import RETRY_OF_ATTRIBUTE, BulkRunActions, retry_key
from runtime_core.bulk_actions._failed import RETRIED_EVENT, RETRY_RUN_ATTRIBUTE, FailedRunReader
from runtime_core.bulk_actions._models import (
    DEFAULT_MAX_RUNS_PER_CALL,
    ActionOutcome,
    BulkSettings,
    FailedRun,
    RunActionResult,
    RunFilter,
    StepAttempt,
)
from runtime_core.bulk_actions._selection import TooManyRunsError

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Services and settings
    "BulkRunActions",
    "FailedRunReader",
    "BulkSettings",
    "DEFAULT_MAX_RUNS_PER_CALL",
    # Shapes
    "RunFilter",
    "FailedRun",
    "StepAttempt",
    "RunActionResult",
    "ActionOutcome",
    "TooManyRunsError",
    # Links between a run and its retry
    "RETRY_OF_ATTRIBUTE",
    "RETRIED_EVENT",
    "RETRY_RUN_ATTRIBUTE",
    "retry_key",
]
