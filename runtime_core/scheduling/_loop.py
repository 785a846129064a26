"""The scheduler loop one control plane runs: every active schedule of every tenant, each pass.

Owns the pass (read the server clock once, then per active schedule: take over a claim whose
lease ended, fire a queue_one tick whose previous run ended, plan the due ticks and claim and
fire them in order, stopping at the first claim it does not win; a stored schedule that does
not read is logged and skipped) and when the next pass runs: a PeriodicPass runs it, told the
wait until the next due tick (at most `poll_interval_ms`), woken at once by a local create /
resume, backing off while a store is unavailable. Several control planes run it at once: the
tick claims decide, never this process's memory. Its liveness is a readiness check. Must not
compute ticks or submit runs itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

from runtime_core.errors import StoreUnavailableError, error_description
from runtime_core.hot_state import HotState
from runtime_core.lifecycle import NextPass, PeriodicPass
from runtime_core.scheduling._firing import TickFirer
from runtime_core.scheduling._settings import SchedulingSettings
from runtime_core.scheduling._spec import OverlapPolicy
from runtime_core.scheduling._ticks import (
    TICK_KIND_CATCH_UP,
    TICK_KIND_SCHEDULED,
    ClaimOutcome,
    ScheduleTicks,
    TickClaim,
    TickState,
)
from runtime_core.scheduling._timing import floor_ms, plan_ticks, tick_clock
from runtime_core.storage import DurableStore, ScheduleRecord

log = logging.getLogger("runtime_core.scheduling")


class Scheduler:
    def __init__(
        self,
        hot_state: HotState,
        store: DurableStore,
        ticks: ScheduleTicks,
        firer: TickFirer,
        settings: SchedulingSettings,
        *,
        owner: str,
    ) -> None:
        self._hot_state = hot_state
        self._store = store
        self.ticks = ticks
        self.firer = firer
        self.settings = settings
        self.owner = owner
        self._loop = PeriodicPass("scheduler", self._pass, settings.poll_interval_ms, log)

    # Lifecycle

    def start(self) -> None:
        self._loop.start()

    @property
    def alive(self) -> bool:
        return self._loop.alive

    def wake(self) -> None:
        self._loop.wake()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> NextPass:
        return NextPass(await self.run_pass())

    # One pass

    async def run_pass(self) -> int:
        """Handle every due tick; the milliseconds until the next one is due (or the poll interval)."""
        started = time.monotonic()
        now_ms = await self._hot_state.server_time_ms()
        deadline = now_ms + self.settings.poll_interval_ms
        async for record in self._active_schedules():
            try:
                deadline = min(deadline, await self._handle(record, now_ms))
            except StoreUnavailableError:
                raise
            except Exception as exc:  # one broken schedule (stored spec, refused run) never stops the others
                log.warning(
                    "scheduler.schedule_failed",
                    extra={
                        "schedule_id": record.schedule_id,
                        "tenant_id": record.tenant_id,
                        "error": error_description(exc),  # a stored spec's values may be secrets
                    },
                )
        elapsed_ms = round((time.monotonic() - started) * 1000)
        return max(deadline - (now_ms + elapsed_ms), 0)

    async def _active_schedules(self) -> AsyncIterator[ScheduleRecord]:
        """Every active schedule that reads; a corrupt stored row is logged (its id and what is
        wrong, never its values) and skipped."""
        after: str | None = None
        while True:
            scan = await self._store.list_active_schedules(after=after)
            for unreadable in scan.unreadable:
                log.warning(
                    "scheduler.schedule_unreadable",
                    extra={"schedule_id": unreadable.schedule_id, "error": unreadable.problem},
                )
            for record in scan.records:
                yield record
            if scan.last_id is None:
                return
            after = scan.last_id

    async def _handle(self, record: ScheduleRecord, now_ms: int) -> int:
        """Fire what is due of one schedule; when its next tick is due (server ms)."""
        clock = tick_clock(record)
        floor = floor_ms(record)
        state = await self.ticks.state(record.schedule_id)
        if state.pending_ms is not None and (state.pending_until_ms or 0) <= now_ms:
            await self._claim_and_fire(
                record, state.pending_ms, state.watermark(floor), floor, TICK_KIND_SCHEDULED
            )
            return now_ms  # look again at once: the taken-over tick may not have been the only one
        if state.queued_ms is not None and clock.spec.overlap is OverlapPolicy.QUEUE_ONE:
            await self._release_queued(record, state)
        planned_from = state.watermark(floor)
        for planned in plan_ticks(clock, planned_from, now_ms, self.settings.misfire_grace_ms):
            kind = TICK_KIND_CATCH_UP if planned.catch_up else TICK_KIND_SCHEDULED
            claim = await self._claim_and_fire(record, planned.tick_ms, planned_from, floor, kind)
            if claim.outcome is not ClaimOutcome.CLAIMED:
                return now_ms if claim.outcome is not ClaimOutcome.BUSY else clock.next_after(now_ms)
            planned_from = planned.tick_ms
        return clock.next_after(max(now_ms, planned_from))

    async def _claim_and_fire(
        self, record: ScheduleRecord, tick_ms: int, planned_from: int, floor: int, kind: str
    ) -> TickClaim:
        claim = await self.ticks.claim(
            record.schedule_id,
            tick_ms,
            planned_from_ms=planned_from,
            floor_ms=floor,
            owner=self.owner,
            kind=kind,
        )
        if claim.won:
            assert claim.tick_ms is not None
            await self.firer.fire(record, claim.tick_ms, claim.kind, self.owner, claim.last_run_id)
        return claim

    async def _release_queued(self, record: ScheduleRecord, state: TickState) -> None:
        assert state.queued_ms is not None
        if state.last_run_id and await self.firer.previous_active(record, state.last_run_id):
            return
        claim = await self.ticks.release_queued(record.schedule_id, state.queued_ms, self.owner)
        if claim is not None and claim.tick_ms is not None:
            await self.firer.fire(record, claim.tick_ms, claim.kind, self.owner, claim.last_run_id)
