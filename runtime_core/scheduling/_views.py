"""What callers see of a schedule: `ScheduleView`, built from the durable record and the clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from runtime_core.scheduling._spec import ScheduleSpec
from runtime_core.scheduling._timing import TickClock
from runtime_core.storage import ScheduleRecord


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


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
        spec = ScheduleSpec.model_validate(record.spec)
        next_fire = None
        if record.status == "active":
            clock = TickClock(spec, round(record.created_at.timestamp() * 1000))
            handled = max(record.last_tick_at or record.created_at, record.status_changed_at)
            next_fire = _at(clock.next_after(max(now_ms, round(handled.timestamp() * 1000))))
        return cls(
            schedule_id=record.schedule_id,
            name=record.name,
            tenant_id=record.tenant_id,
            status=record.status,
            spec=spec,
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
