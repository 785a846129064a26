"""Schedules: per-tenant cron and fixed-interval runs of a pipeline, each tick fired once.

Owns schedule specs (5- or 6-field cron in an IANA zone, via croniter; or an interval), the
catch-up and overlap policies, the tick arithmetic, the Redis tick claims that make each
tick fire exactly once however many control planes run a scheduler (plus an idempotency key
per tick through the idempotent submit), the scheduler loop (with its copy of the active
schedules, read again when a schedules-changed version moves) and the caller-facing
ScheduleService. Schedules are stored in the durable store; runs are submitted through the
ControlPlane. Must not dispatch or execute runs.
"""

from runtime_core.scheduling._active import ActiveSchedules
from runtime_core.scheduling._assembly import Scheduling, build_scheduling
from runtime_core.scheduling._firing import FiredTick, FireOutcome, TickFirer, idempotency_key, run_snapshot
from runtime_core.scheduling._loop import Scheduler
from runtime_core.scheduling._service import ScheduleService
from runtime_core.scheduling._settings import SchedulingSettings
from runtime_core.scheduling._spec import MAX_BACKFILL, CatchUpPolicy, OverlapPolicy, ScheduleSpec, parse_spec
from runtime_core.scheduling._ticks import (
    TICK_KIND_CATCH_UP,
    TICK_KIND_MANUAL,
    TICK_KIND_QUEUED,
    TICK_KIND_SCHEDULED,
    ClaimOutcome,
    ScheduleTicks,
    SettleOutcome,
    TickClaim,
    TickState,
)
from runtime_core.scheduling._timing import PlannedTick, TickClock, plan_ticks
from runtime_core.scheduling._views import UNREADABLE_SCHEDULE_NEXT_STEP, ScheduleListing, ScheduleView

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Assembly and settings
    "Scheduling",
    "build_scheduling",
    "SchedulingSettings",
    # What a schedule says
    "ScheduleSpec",
    "CatchUpPolicy",
    "OverlapPolicy",
    "parse_spec",
    "MAX_BACKFILL",
    # Ticks
    "TickClock",
    "PlannedTick",
    "plan_ticks",
    "ScheduleTicks",
    "TickState",
    "TickClaim",
    "ClaimOutcome",
    "SettleOutcome",
    "TICK_KIND_SCHEDULED",
    "TICK_KIND_CATCH_UP",
    "TICK_KIND_QUEUED",
    "TICK_KIND_MANUAL",
    # Firing and the loop
    "TickFirer",
    "FiredTick",
    "FireOutcome",
    "idempotency_key",
    "run_snapshot",
    "Scheduler",
    "ActiveSchedules",
    # Caller-facing
    "ScheduleService",
    "ScheduleView",
    "ScheduleListing",
    "UNREADABLE_SCHEDULE_NEXT_STEP",
]
