"""Tools `schedules.create / list / get / pause / resume / delete / trigger`.

Owns resolving the pipeline argument, turning the flat arguments into a ScheduleSpec and
shaping ScheduleService answers (an unreadable schedule as what is wrong and what to do).
Must not store schedules, compute ticks or fire runs: the ScheduleService does, tenant-scoped
by the caller's snapshot.
"""

from __future__ import annotations

from typing import Any

from mcp_runtime._registration import ToolCall, ToolSpec
from mcp_runtime._run_tools import resolve_pipeline
from mcp_runtime._schedule_io import (
    ScheduleCreateInput,
    ScheduleDeleteOutput,
    ScheduleIdInput,
    ScheduleInfo,
    ScheduleListInput,
    ScheduleListOutput,
    ScheduleOutput,
    ScheduleTriggerOutput,
    UnreadableScheduleInfo,
)
from runtime_core.errors import ConfigurationError
from runtime_core.pipeline import PipelineCatalog
from runtime_core.scheduling import UNREADABLE_SCHEDULE_NEXT_STEP, ScheduleService, ScheduleView, parse_spec
from runtime_core.storage import UnreadableSchedule

_SPEC_FIELDS = ("cron", "interval_seconds", "timezone", "catch_up", "backfill_limit", "overlap", "priority")


def schedule_info(view: ScheduleView) -> ScheduleInfo:
    spec = view.spec
    return ScheduleInfo(
        schedule_id=view.schedule_id,
        name=view.name,
        tenant_id=view.tenant_id,
        status=view.status,
        cron=spec.cron,
        interval_seconds=spec.interval_seconds,
        timezone=spec.timezone,
        catch_up=spec.catch_up.value,
        backfill_limit=spec.backfill_limit,
        overlap=spec.overlap.value,
        priority=spec.priority,
        pipeline=view.pipeline,
        input=view.input,
        created_by=view.created_by,
        created_at=view.created_at,
        next_fire_at=view.next_fire_at,
        last_tick_at=view.last_tick_at,
        last_fired_at=view.last_fired_at,
        last_run_id=view.last_run_id,
        last_outcome=view.last_outcome,
        fire_count=view.fire_count,
    )


def unreadable_info(found: UnreadableSchedule) -> UnreadableScheduleInfo:
    return UnreadableScheduleInfo(
        schedule_id=found.schedule_id,
        name=found.name,
        problem=found.problem,
        next_step=UNREADABLE_SCHEDULE_NEXT_STEP,
    )


class ScheduleTools:
    def __init__(self, schedules: ScheduleService | None, catalog: PipelineCatalog) -> None:
        self._service = schedules
        self._catalog = catalog

    @property
    def _schedules(self) -> ScheduleService:
        if self._service is None:
            raise ConfigurationError(
                "Schedules are not available in this server.",
                hint="Serve the control plane with its durable store (mcp-runtime serve).",
            )
        return self._service

    async def create(self, request: ScheduleCreateInput, call: ToolCall) -> ScheduleOutput:
        spec = parse_spec({name: getattr(request, name) for name in _SPEC_FIELDS})
        pipeline = resolve_pipeline(self._catalog, request)
        view = await self._schedules.create(call.snapshot, request.name, pipeline, request.input, spec)
        return ScheduleOutput(schedule=schedule_info(view))

    async def list(self, request: ScheduleListInput, call: ToolCall) -> ScheduleListOutput:
        listing = await self._schedules.list(
            call.snapshot, after_name=request.after_name, limit=request.limit
        )
        return ScheduleListOutput(
            tenant_id=call.snapshot.tenant_id,
            schedules=[schedule_info(view) for view in listing.schedules],
            unreadable=[unreadable_info(found) for found in listing.unreadable],
            next_after_name=listing.next_after_name,
        )

    async def get(self, request: ScheduleIdInput, call: ToolCall) -> ScheduleOutput:
        return ScheduleOutput(
            schedule=schedule_info(await self._schedules.get(call.snapshot, request.schedule_id))
        )

    async def pause(self, request: ScheduleIdInput, call: ToolCall) -> ScheduleOutput:
        view = await self._schedules.pause(call.snapshot, request.schedule_id)
        return ScheduleOutput(schedule=schedule_info(view))

    async def resume(self, request: ScheduleIdInput, call: ToolCall) -> ScheduleOutput:
        view = await self._schedules.resume(call.snapshot, request.schedule_id)
        return ScheduleOutput(schedule=schedule_info(view))

    async def delete(self, request: ScheduleIdInput, call: ToolCall) -> ScheduleDeleteOutput:
        deleted = await self._schedules.delete(call.snapshot, request.schedule_id)
        if isinstance(deleted, UnreadableSchedule):
            return ScheduleDeleteOutput(schedule=None, unreadable=unreadable_info(deleted))
        return ScheduleDeleteOutput(schedule=schedule_info(deleted))

    async def trigger(self, request: ScheduleIdInput, call: ToolCall) -> ScheduleTriggerOutput:
        run_id, at = await self._schedules.trigger(call.snapshot, request.schedule_id)
        return ScheduleTriggerOutput(schedule_id=request.schedule_id, shared_run_id=run_id, triggered_at=at)

    def specs(self) -> list[ToolSpec[Any, Any]]:
        by_id = (
            (
                "get",
                "Read a schedule",
                "One schedule of your tenant with its next and last fire times.",
                True,
            ),
            (
                "pause",
                "Pause a schedule",
                "Stop firing ticks (a run already started goes on); pausing a paused one changes nothing.",
                False,
            ),
            (
                "resume",
                "Resume a schedule",
                "Fire ticks again from now on: ticks that passed while it was paused are not fired.",
                False,
            ),
            (
                "delete",
                "Delete a schedule",
                "Delete the schedule (answers it as it was, or what was wrong with an unreadable one); "
                "runs it made are kept.",
                False,
            ),
        )
        return [
            ToolSpec(
                name="schedules.create",
                title="Create a schedule",
                description=(
                    "Run a pipeline (catalog `pipeline` or inline `definition`) with an `input` on a cron "
                    "expression (5 fields, or 6 with seconds first, in an IANA `timezone`) or every "
                    "`interval_seconds`. Each tick fires exactly once however many control planes run; "
                    "the runs act for you, in your tenant, and carry schedule.id / schedule.tick in their "
                    "snapshot attributes and ledger. `catch_up` says what happens to ticks missed while "
                    "no scheduler ran, `overlap` what a tick does while the previous run is active."
                ),
                input_model=ScheduleCreateInput,
                output_model=ScheduleOutput,
                handler=self.create,
                read_only=False,
            ),
            ToolSpec(
                name="schedules.list",
                title="List schedules",
                description=(
                    "Your tenant's schedules by name, with their next and last fire times; one stored "
                    "damaged is listed apart in `unreadable` (it does not fire: delete it, then create it "
                    "again)."
                ),
                input_model=ScheduleListInput,
                output_model=ScheduleListOutput,
                handler=self.list,
                read_only=True,
                idempotent=True,
            ),
            *[
                ToolSpec(
                    name=f"schedules.{name}",
                    title=title,
                    description=f"{description} Ids of other tenants answer not found.",
                    input_model=ScheduleIdInput,
                    output_model=ScheduleDeleteOutput if name == "delete" else ScheduleOutput,
                    handler=getattr(self, name),
                    read_only=read_only,
                    destructive=name == "delete",
                    idempotent=name != "delete",
                )
                for name, title, description, read_only in by_id
            ],
            ToolSpec(
                name="schedules.trigger",
                title="Trigger a schedule now",
                description=(
                    "Submit one run of the schedule now, outside its ticks (no tick is used up and the "
                    "overlap policy does not apply); the run carries schedule.trigger=manual."
                ),
                input_model=ScheduleIdInput,
                output_model=ScheduleTriggerOutput,
                handler=self.trigger,
                read_only=False,
            ),
        ]
