"""ScheduleService: create, list, read, pause, resume, delete and trigger a tenant's schedules.

Owns the caller-facing operations behind the `schedules.*` tools: every one takes the
caller's ExecutionContextSnapshot and touches only that tenant's schedules (another tenant's
id answers not found, exactly like an unknown one). A new schedule's pipeline and input are
checked as a submit would check them, and the creator's snapshot is stored: the runs it
fires act for that principal. A resume never fires the ticks that passed while paused. A
trigger submits one run now, outside the schedule's ticks (no tick is used up, overlap is
not applied). A stored schedule that does not read (a damaged row, a spec this release no
longer accepts) is listed apart and can only be deleted: any other operation on it is an
UnreadableRecordError that says so, and changes nothing. Must not run the scheduler loop.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from runtime_core.errors import ConflictError, MissingSnapshotError, NotFoundError, UnreadableRecordError
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition
from runtime_core.scheduling._firing import TickFirer, run_snapshot
from runtime_core.scheduling._spec import ScheduleSpec
from runtime_core.scheduling._ticks import TICK_KIND_MANUAL, ScheduleTicks
from runtime_core.scheduling._timing import utc_at
from runtime_core.scheduling._views import (
    UNREADABLE_SCHEDULE_NEXT_STEP,
    ScheduleListing,
    ScheduleView,
    view_of,
)
from runtime_core.storage import DurableStore, ScheduleRecord, UnreadableSchedule

PipelineCheck = Callable[[PipelineDefinition], None]
InputCheck = Callable[[Any], None]
ACTIVE, PAUSED = "active", "paused"


def new_schedule_id() -> str:
    return f"sched_{secrets.token_hex(12)}"


def _require(snapshot: ExecutionContextSnapshot | None) -> ExecutionContextSnapshot:
    if snapshot is None:
        raise MissingSnapshotError(
            "Schedules need the caller's ExecutionContextSnapshot.",
            hint="Capture it from the authenticated principal.",
        )
    return snapshot


def _not_found(schedule_id: str) -> NotFoundError:
    return NotFoundError(
        f"Schedule '{schedule_id}' was not found in your tenant.",
        hint="List your tenant's schedules with schedules.list.",
    )


def _unreadable(found: UnreadableSchedule) -> UnreadableRecordError:
    named = f" ('{found.name}')" if found.name else ""
    return UnreadableRecordError(
        f"Schedule '{found.schedule_id}'{named} cannot be read as stored: {found.problem}.",
        hint=UNREADABLE_SCHEDULE_NEXT_STEP,
    )


def _readable(
    found: ScheduleRecord | UnreadableSchedule | None, schedule_id: str, now_ms: int
) -> tuple[ScheduleRecord, ScheduleView]:
    """The stored schedule and its view; NotFoundError when there is none, UnreadableRecordError
    when it does not read."""
    if found is None:
        raise _not_found(schedule_id)
    if isinstance(found, ScheduleRecord):
        view = view_of(found, now_ms)
        if isinstance(view, ScheduleView):
            return found, view
        found = view
    raise _unreadable(found)


class ScheduleService:
    def __init__(
        self,
        hot_state: HotState,
        store: DurableStore,
        ticks: ScheduleTicks,
        firer: TickFirer,
        *,
        check_pipeline: PipelineCheck,
        check_input: InputCheck,
        changed: Callable[[], Awaitable[None]],
    ) -> None:
        """`changed`: tells every scheduler the active schedules changed (after the store has it)."""
        self._hot_state = hot_state
        self._store = store
        self._ticks = ticks
        self._firer = firer
        self._check_pipeline = check_pipeline
        self._check_input = check_input
        self._changed = changed

    async def _now(self) -> tuple[int, datetime]:
        now_ms = await self._hot_state.server_time_ms()
        return now_ms, utc_at(now_ms)

    async def create(
        self,
        snapshot: ExecutionContextSnapshot | None,
        name: str,
        pipeline: PipelineDefinition,
        input: dict[str, Any],
        spec: ScheduleSpec,
    ) -> ScheduleView:
        """ConflictError when the tenant already has a schedule of that name."""
        caller = _require(snapshot)
        self._check_pipeline(pipeline)
        self._check_input(input)
        now_ms, now = await self._now()
        record = ScheduleRecord(
            schedule_id=new_schedule_id(),
            tenant_id=caller.tenant_id,
            name=name,
            spec=spec.model_dump(mode="json"),
            pipeline=pipeline.model_dump(mode="json", by_alias=True),
            input=input,
            snapshot=caller.model_dump(mode="json", exclude={"attributes"}),
            created_at=now,
            status_changed_at=now,
        )
        if not await self._store.insert_schedule(record):
            raise ConflictError(
                f"Your tenant already has a schedule named '{name}'.",
                hint="Choose another name, or delete that schedule first (schedules.list shows it).",
            )
        await self._changed()
        return ScheduleView.of(record, now_ms)

    async def list(
        self, snapshot: ExecutionContextSnapshot | None, *, after_name: str | None = None, limit: int = 100
    ) -> ScheduleListing:
        """At most `limit` schedules, readable and unreadable together, by name."""
        caller = _require(snapshot)
        now_ms, _ = await self._now()
        page = await self._store.list_schedules(caller.tenant_id, after_name=after_name, limit=limit)
        views = [view_of(record, now_ms) for record in page.records]
        unreadable = [*page.unreadable, *(view for view in views if isinstance(view, UnreadableSchedule))]
        return ScheduleListing(
            schedules=[view for view in views if isinstance(view, ScheduleView)],
            unreadable=sorted(unreadable, key=lambda found: found.name or ""),
            next_after_name=page.last_name,
        )

    async def get(self, snapshot: ExecutionContextSnapshot | None, schedule_id: str) -> ScheduleView:
        """UnreadableRecordError when the stored schedule does not read (it can only be deleted)."""
        caller = _require(snapshot)
        now_ms, _ = await self._now()
        return (await self._record(caller, schedule_id, now_ms))[1]

    async def _record(
        self, caller: ExecutionContextSnapshot, schedule_id: str, now_ms: int
    ) -> tuple[ScheduleRecord, ScheduleView]:
        return _readable(await self._store.get_schedule(caller.tenant_id, schedule_id), schedule_id, now_ms)

    async def pause(self, snapshot: ExecutionContextSnapshot | None, schedule_id: str) -> ScheduleView:
        return await self._set_status(_require(snapshot), schedule_id, PAUSED)

    async def resume(self, snapshot: ExecutionContextSnapshot | None, schedule_id: str) -> ScheduleView:
        """Ticks that passed while paused are never fired (the resume time is their floor)."""
        return await self._set_status(_require(snapshot), schedule_id, ACTIVE)

    async def _set_status(
        self, caller: ExecutionContextSnapshot, schedule_id: str, status: str
    ) -> ScheduleView:
        """An unreadable schedule is refused before anything is written."""
        now_ms, now = await self._now()
        await self._record(caller, schedule_id, now_ms)
        found = await self._store.set_schedule_status(caller.tenant_id, schedule_id, status, now)
        await self._changed()
        return _readable(found, schedule_id, now_ms)[1]

    async def delete(
        self, snapshot: ExecutionContextSnapshot | None, schedule_id: str
    ) -> ScheduleView | UnreadableSchedule:
        """The schedule as it was, or what was wrong with it when it did not read (deleting is the
        one action such a schedule allows); a tick being fired at this moment may still make its
        run."""
        caller = _require(snapshot)
        found = await self._store.get_schedule(caller.tenant_id, schedule_id)
        if found is None or not await self._store.delete_schedule(caller.tenant_id, schedule_id):
            raise _not_found(schedule_id)
        await self._ticks.forget(schedule_id)
        await self._changed()
        if isinstance(found, UnreadableSchedule):
            return found
        now_ms, _ = await self._now()
        return view_of(found.model_copy(update={"status": "deleted"}), now_ms)

    async def trigger(
        self, snapshot: ExecutionContextSnapshot | None, schedule_id: str
    ) -> tuple[str, datetime]:
        """Submit one run of the schedule now: (its shared_run_id, the trigger time)."""
        caller = _require(snapshot)
        now_ms, now = await self._now()
        record, view = await self._record(caller, schedule_id, now_ms)
        run_id = await self._firer.submit(
            record,
            view.spec,
            now_ms,
            TICK_KIND_MANUAL,
            run_snapshot(record, now_ms, TICK_KIND_MANUAL, self._firer.fired_by),
        )
        return run_id, now
