"""Input and output models of the `schedules.*` tools (the published argument and answer schemas).

Owns the field names, limits and descriptions of a schedule as a caller writes and reads it.
Defaults are plain values (tool arguments are flat). Must not contain behaviour beyond
argument validation: the timing and policies are checked by `runtime_core.scheduling`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from mcp_runtime._inputs import ID_PATTERN, MAX_ID_LENGTH, NAME_PATTERN, PipelineRunInput, ToolInput
from mcp_runtime._outputs import ToolOutput
from runtime_core.flow import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY
from runtime_core.scheduling import MAX_BACKFILL

SCHEDULE_ID_DESCRIPTION = "The schedule's id (sched_...), as schedules.create or schedules.list shows it."


class ScheduleCreateInput(PipelineRunInput):
    name: str = Field(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=NAME_PATTERN,
        description="A name for the schedule, unique in your tenant (e.g. 'nightly-report').",
    )
    cron: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        description="When it fires: a cron expression of 5 fields (minute hour day-of-month month "
        "day-of-week, e.g. '0 2 * * *') or 6 with seconds first ('*/10 * * * * *'), read in `timezone`. "
        "Give either this or `interval_seconds`.",
    )
    interval_seconds: int | None = Field(
        None, ge=1, description="Fire every this many seconds from the creation time (instead of `cron`)."
    )
    timezone: str = Field(
        "UTC",
        max_length=64,
        description="IANA time zone the cron expression is read in, e.g. 'Europe/Berlin'. Daylight-saving "
        "changes follow croniter: a time skipped by the spring change fires at the first valid time after "
        "it, a time repeated by the autumn change fires in both.",
    )
    catch_up: Literal["skip", "run_once", "backfill"] = Field(
        "run_once",
        description="Ticks missed while no scheduler ran: skip them, fire the latest one once "
        "(run_once), or fire the latest `backfill_limit` of them (backfill).",
    )
    backfill_limit: int = Field(
        10, ge=1, le=MAX_BACKFILL, description="With catch_up=backfill: at most this many."
    )
    overlap: Literal["allow", "skip", "cancel_previous", "queue_one"] = Field(
        "skip",
        description="A tick while the previous run is active: allow another run, skip the tick, "
        "cancel_previous then start, or queue_one (fire when the previous run ends; more ticks are skipped).",
    )
    priority: int | None = Field(
        None,
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
        description=f"The priority of every run it fires, {MIN_PRIORITY}-{MAX_PRIORITY} (default "
        f"{DEFAULT_PRIORITY}), as `submit` takes it.",
    )


class ScheduleIdInput(ToolInput):
    schedule_id: str = Field(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN, description=SCHEDULE_ID_DESCRIPTION
    )


class ScheduleListInput(ToolInput):
    after_name: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        description="Continue after this schedule name (the `next_after_name` of the page you got).",
    )
    limit: int = Field(
        100, ge=1, le=500, description="At most this many schedules (1-500), unreadable ones included."
    )


class ScheduleInfo(ToolOutput):
    schedule_id: str
    name: str
    tenant_id: str
    status: str = Field(description="active, paused, or deleted (the answer of schedules.delete).")
    cron: str | None
    interval_seconds: int | None
    timezone: str
    catch_up: str
    backfill_limit: int
    overlap: str
    priority: int | None = Field(description="The priority of its runs (None: the default).")
    pipeline: str
    input: dict[str, Any]
    created_by: str = Field(description="The user the fired runs act for.")
    created_at: datetime
    next_fire_at: datetime | None = Field(description="The next tick (None while paused).")
    last_tick_at: datetime | None = Field(description="The newest tick handled (fired, skipped or queued).")
    last_fired_at: datetime | None = Field(
        description="When a tick was last handled (a queued tick fired late included)."
    )
    last_run_id: str | None = Field(description="The newest run a tick made, if any.")
    last_outcome: str | None = Field(
        description="The last handling's outcome: fired, cancelled_previous, skipped_overlap, queued "
        "or submit_failed."
    )
    fire_count: int = Field(description="Ticks that made a run (a queued tick fired late included).")


class ScheduleOutput(ToolOutput):
    schedule: ScheduleInfo


class UnreadableScheduleInfo(ToolOutput):
    schedule_id: str
    name: str | None = Field(description="Its name, when that still reads.")
    problem: str = Field(description="What does not read (the stored fields and why, never their values).")
    next_step: str = Field(description="What to do: it can only be deleted, then created again.")


class ScheduleListOutput(ToolOutput):
    tenant_id: str
    schedules: list[ScheduleInfo]
    unreadable: list[UnreadableScheduleInfo] = Field(
        description="Your tenant's schedules on this page that are stored damaged (or whose timing "
        "this release no longer accepts): they do not fire, and can only be deleted."
    )
    next_after_name: str | None = Field(
        description="Pass as `after_name` for the next page (None: this was the last page)."
    )


class ScheduleDeleteOutput(ToolOutput):
    schedule: ScheduleInfo | None = Field(
        description="The deleted schedule as it was (status: deleted); None when it was unreadable."
    )
    unreadable: UnreadableScheduleInfo | None = Field(
        None, description="Set when the deleted schedule was unreadable: what was wrong with it."
    )


class ScheduleTriggerOutput(ToolOutput):
    schedule_id: str
    shared_run_id: str = Field(description="The run submitted now: follow it with run.status.")
    triggered_at: datetime
