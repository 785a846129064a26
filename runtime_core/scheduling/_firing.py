"""Firing one claimed tick: the overlap policy, the idempotent submit, the record of it.

Owns what a won tick does: the run acts for the schedule's creator (the stored snapshot)
with `schedule.id`, `schedule.tick` and `schedule.trigger` attributes; while the previous
run is active the overlap policy skips the tick, cancels that run first, or keeps the tick
waiting (queue_one); the submit carries the tick's idempotency key
(`schedule:<id>:<tick ms>`), so a tick fired again after a claim's lease ended returns the
same run. Then the tick is settled in Redis and recorded durably. Must not choose ticks or
claim them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from runtime_core.control_plane import ControlPlane, run_is_done
from runtime_core.errors import NotFoundError, RuntimeCoreError, StoreUnavailableError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition
from runtime_core.scheduling._spec import OverlapPolicy, ScheduleSpec
from runtime_core.scheduling._ticks import TICK_KIND_QUEUED, ScheduleTicks, SettleOutcome
from runtime_core.scheduling._timing import utc_at
from runtime_core.storage import DurableStore, ScheduleFire, ScheduleRecord

log = logging.getLogger("runtime_core.scheduling")


class FireOutcome(StrEnum):
    FIRED = "fired"
    SKIPPED_OVERLAP = "skipped_overlap"
    QUEUED = "queued"
    CANCELLED_PREVIOUS = "cancelled_previous"
    SUBMIT_FAILED = "submit_failed"
    LOST_CLAIM = "lost_claim"


@dataclass(frozen=True)
class FiredTick:
    tick_ms: int
    outcome: FireOutcome
    run_id: str | None = None


def idempotency_key(schedule_id: str, tick_ms: int, kind: str) -> str:
    """One key per tick (manual triggers have their own namespace: they are not ticks)."""
    return f"schedule:{schedule_id}:{'manual:' if kind == 'manual' else ''}{tick_ms}"


def run_snapshot(
    record: ScheduleRecord, tick_ms: int, kind: str, fired_by: str = ""
) -> ExecutionContextSnapshot:
    """The schedule creator's snapshot, captured now, saying which schedule and tick made the run
    (and which control plane fired it)."""
    stored = {k: v for k, v in record.snapshot.items() if k not in ("captured_at", "attributes")}
    return ExecutionContextSnapshot.model_validate(
        {
            **stored,
            "attributes": {
                "schedule.id": record.schedule_id,
                "schedule.name": record.name,
                "schedule.tick": utc_at(tick_ms).isoformat(timespec="milliseconds"),
                "schedule.trigger": kind,
                "schedule.fired_by": fired_by,
            },
        }
    )


class TickFirer:
    def __init__(self, control_plane: ControlPlane, store: DurableStore, ticks: ScheduleTicks) -> None:
        self.fired_by = control_plane.settings.control_plane_id
        self._control_plane = control_plane
        self._store = store
        self._ticks = ticks

    async def fire(
        self, record: ScheduleRecord, tick_ms: int, kind: str, owner: str, last_run_id: str | None
    ) -> FiredTick:
        """Fire the tick `owner` holds a claim on; StoreUnavailableError leaves the claim to expire
        (another pass, maybe another scheduler, fires it again under the same idempotency key)."""
        spec = ScheduleSpec.model_validate(record.spec)
        snapshot = run_snapshot(record, tick_ms, kind, self.fired_by)
        outcome = FireOutcome.FIRED
        if spec.overlap is not OverlapPolicy.ALLOW and kind != TICK_KIND_QUEUED and last_run_id:
            if await self._active(last_run_id, snapshot):
                if spec.overlap is OverlapPolicy.SKIP:
                    return await self._settle(record, tick_ms, kind, owner, FireOutcome.SKIPPED_OVERLAP)
                if spec.overlap is OverlapPolicy.QUEUE_ONE:
                    return await self._settle(record, tick_ms, kind, owner, FireOutcome.QUEUED, queue=True)
                await self._cancel(last_run_id, snapshot)
                outcome = FireOutcome.CANCELLED_PREVIOUS
        try:
            run_id = await self.submit(record, spec, tick_ms, kind, snapshot)
        except StoreUnavailableError:
            raise
        except RuntimeCoreError as exc:  # the request itself is refused: retrying will not help
            log.warning(
                "schedule.submit_failed",
                extra={
                    "schedule_id": record.schedule_id,
                    "tenant_id": record.tenant_id,
                    "error": exc.message,
                },
            )
            return await self._settle(record, tick_ms, kind, owner, FireOutcome.SUBMIT_FAILED)
        return await self._settle(record, tick_ms, kind, owner, outcome, run_id=run_id)

    async def submit(
        self,
        record: ScheduleRecord,
        spec: ScheduleSpec,
        tick_ms: int,
        kind: str,
        snapshot: ExecutionContextSnapshot,
    ) -> str:
        result = await self._control_plane.submit(
            PipelineDefinition.model_validate(record.pipeline),
            record.input,
            None,
            snapshot,
            idempotency_key=idempotency_key(record.schedule_id, tick_ms, kind),
            priority=spec.priority,
        )
        log.info(
            "schedule.fired",
            extra={
                "schedule_id": record.schedule_id,
                "tenant_id": record.tenant_id,
                "shared_run_id": result.shared_run_id,
                "tick_ms": tick_ms,
                "trigger": kind,
                "deduplicated": result.deduplicated,
            },
        )
        return result.shared_run_id

    async def previous_active(self, record: ScheduleRecord, run_id: str) -> bool:
        """Whether the schedule's run `run_id` is still active (read as the schedule's creator)."""
        return await self._active(run_id, run_snapshot(record, 0, "overlap_check"))

    async def _active(self, run_id: str, snapshot: ExecutionContextSnapshot) -> bool:
        try:
            return not run_is_done(await self._control_plane.run_status(run_id, snapshot))
        except NotFoundError:
            return False

    async def _cancel(self, run_id: str, snapshot: ExecutionContextSnapshot) -> None:
        try:
            await self._control_plane.cancel(run_id, snapshot, reason="schedule overlap: cancel_previous")
        except StoreUnavailableError:
            raise
        except RuntimeCoreError as exc:  # it ended meanwhile, or is gone: nothing to cancel
            log.info(
                "schedule.cancel_previous_skipped", extra={"shared_run_id": run_id, "error": exc.message}
            )

    async def _settle(
        self,
        record: ScheduleRecord,
        tick_ms: int,
        kind: str,
        owner: str,
        outcome: FireOutcome,
        *,
        run_id: str | None = None,
        queue: bool = False,
    ) -> FiredTick:
        settled = await self._ticks.settle(record.schedule_id, tick_ms, owner, run_id=run_id, queue=queue)
        if settled is SettleOutcome.LOST:
            return FiredTick(tick_ms, FireOutcome.LOST_CLAIM, run_id)
        if settled is SettleOutcome.DROPPED:
            outcome = FireOutcome.SKIPPED_OVERLAP
        # A waiting (queue_one) tick fires after newer ticks were handled: its record still counts.
        late = kind == TICK_KIND_QUEUED
        fire = ScheduleFire(tick_at=utc_at(tick_ms), run_id=run_id, outcome=outcome.value, late=late)
        await self._store.record_schedule_fire(record.tenant_id, record.schedule_id, fire)
        return FiredTick(tick_ms, outcome, run_id)
