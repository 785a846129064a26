"""What callers see of a schedule: `ScheduleView`, built from the durable record and the clock,
or the UnreadableSchedule a stored schedule is when what it fires with (its spec, pipeline or
creator's snapshot) no longer validates; a page of a tenant's schedules (`ScheduleListing`).
Must not read the store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from runtime_core.errors import error_description
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition
from runtime_core.scheduling._spec import ScheduleSpec
from runtime_core.scheduling._timing import floor_ms, tick_clock, utc_at
from runtime_core.storage import ScheduleRecord, UnreadableSchedule

UNREADABLE_SCHEDULE_NEXT_STEP = (
    "Delete it with schedules.delete (the one action it allows), then create it again with schedules.create."
)


class ScheduleView(BaseModel):
    """A schedule with its next fire time (None while paused) and its newest handled tick."""

    schedule_id: str
    name: str
    tenant_id: str
    status: str
    spec: ScheduleSpec
    pipeline: str
    input: dict[str, Any]
    created_by: str
    created_at: datetime
    status_changed_at: datetime
    next_fire_at: datetime | None
    last_tick_at: datetime | None
    last_fired_at: datetime | None
    last_run_id: str | None
    last_outcome: str | None
    fire_count: int

    @classmethod
    def of(cls, record: ScheduleRecord, now_ms: int) -> ScheduleView:
        clock = tick_clock(record)
        next_fire = None
        if record.status == "active":
            next_fire = utc_at(clock.next_after(max(now_ms, floor_ms(record))))
        return cls(
            schedule_id=record.schedule_id,
            name=record.name,
            tenant_id=record.tenant_id,
            status=record.status,
            spec=clock.spec,
            pipeline=str(record.pipeline.get("name", "")),
            input=record.input,
            created_by=str(record.snapshot.get("user_id", "")),
            created_at=record.created_at,
            status_changed_at=record.status_changed_at,
            next_fire_at=next_fire,
            last_tick_at=record.last_tick_at,
            last_fired_at=record.last_fired_at,
            last_run_id=record.last_run_id,
            last_outcome=record.last_outcome,
            fire_count=record.fire_count,
        )


def view_of(record: ScheduleRecord, now_ms: int) -> ScheduleView | UnreadableSchedule:
    """The record's view, or UnreadableSchedule when its stored spec, pipeline or snapshot does
    not validate, so it could not fire (its description names fields, never the stored values)."""
    try:
        PipelineDefinition.model_validate(record.pipeline)
        ExecutionContextSnapshot.model_validate(record.snapshot)
        return ScheduleView.of(record, now_ms)
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError of the stored spec
        return UnreadableSchedule(record.schedule_id, error_description(exc), record.name)


@dataclass(frozen=True)
class ScheduleListing:
    """A page of a tenant's schedules by name: the readable ones, the unreadable ones apart (a
    damaged row, a spec that no longer validates: each can only be deleted), and the name to
    continue after (None: the listing is over)."""

    schedules: list[ScheduleView]
    unreadable: list[UnreadableSchedule]
    next_after_name: str | None
