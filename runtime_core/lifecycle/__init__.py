"""What happens to a finished run's state: archived durably, its hot state retired, expired.

Owns the lifecycle of finished runs. Once a run ended (before dispatch: Rejected, Cancelled,
Failed; or through the local run it was dispatched to, with its execution terminal) and its
terminal snapshot, ledger and trace are durable, its RunRecord is written to the durable
store and, after a configurable grace, its Redis state goes: the execution's keys are
dropped (`drop_execution`), the run leaves the shared queue's live structures
(`retire_shared_run`), its shared-run, run-index and dispatch-attempt records expire after a
retention. Also owns the background purge of durable records older than their window, and
`runs.list` (RunCatalog): a tenant's runs from hot state and run records alike. Must not
execute, dispatch or recover runs, and never touches a run that is still going on.
"""

from runtime_core.lifecycle._archiver import ArchiveOutcome, ArchiverParts, RunArchiver
from runtime_core.lifecycle._assembly import Lifecycle, LifecycleStores, build_lifecycle
from runtime_core.lifecycle._catalog import RunCatalog
from runtime_core.lifecycle._listing import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    RunListPage,
    RunListQuery,
    RunListRow,
    RunStatusCounts,
    decode_cursor,
    encode_cursor,
    epoch_ms,
    from_epoch_ms,
)
from runtime_core.lifecycle._periodic import NextPass, PeriodicPass
from runtime_core.lifecycle._purge import DurablePurge
from runtime_core.lifecycle._records import run_record
from runtime_core.lifecycle._schedule import LifecycleSchedule
from runtime_core.lifecycle._settings import (
    KEEP_FOREVER,
    DurableRetention,
    HotStateRetention,
    LifecycleSettings,
)
from runtime_core.lifecycle._sweeper import HotStateSweeper

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Assembly and settings
    "Lifecycle",
    "LifecycleStores",
    "build_lifecycle",
    "LifecycleSettings",
    "HotStateRetention",
    "DurableRetention",
    "KEEP_FOREVER",
    # Finished runs: archive and retire hot state
    "RunArchiver",
    "ArchiverParts",
    "ArchiveOutcome",
    "run_record",
    "LifecycleSchedule",
    "HotStateSweeper",
    # Durable retention
    "DurablePurge",
    # Background loop
    "PeriodicPass",
    "NextPass",
    # Run listing
    "RunCatalog",
    "RunListQuery",
    "RunListRow",
    "RunListPage",
    "RunStatusCounts",
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "encode_cursor",
    "decode_cursor",
    "epoch_ms",
    "from_epoch_ms",
]
