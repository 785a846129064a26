"""What callers see of a schedule: `ScheduleView`, built from the durable record and the clock."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from runtime_core.scheduling._spec import ScheduleSpec
from runtime_core.scheduling._timing import floor_ms, tick_clock, utc_at
from runtime_core.storage import ScheduleRecord


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
