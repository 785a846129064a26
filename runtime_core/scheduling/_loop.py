"""The scheduler loop one control plane runs: every active schedule of every tenant, each pass.

Owns the pass (one pipelined read of the server clock, the schedules-changed version and the
tick state of every active schedule it knows, reading the durable store again only when the
version moved (`ActiveSchedules`); then per active schedule: take over a claim whose lease
ended, fire a queue_one tick whose previous run ended, plan the due ticks and claim and fire
them in order, stopping at the first claim it does not win) and when the next pass runs: a
PeriodicPass runs it, told the wait until the next due tick (at most `poll_interval_ms`),
woken at once by a local change, backing off while a store is unavailable. Several control
planes run it at once: the tick claims decide, never this process's memory. Its liveness is
a readiness check. Must not compute ticks or submit runs itself.
"""

from __future__ import annotations

import logging
import time

from runtime_core.errors import StoreUnavailableError, error_description
from runtime_core.hot_state import HotState, time_reply_ms
from runtime_core.lifecycle import NextPass, PeriodicPass
from runtime_core.scheduling._active import ActiveSchedules
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
        self.active = ActiveSchedules(hot_state, store, refresh_interval_ms=settings.refresh_interval_ms)
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

    async def schedules_changed(self) -> None:
        """A schedule was created, paused, resumed or deleted: every scheduler (this one at once)
        reads the active schedules again."""
        await self.active.changed()
        self.wake()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _pass(self) -> NextPass:
        return NextPass(await self.run_pass())

    # One pass

    async def run_pass(self) -> int:
        """Handle every due tick; the milliseconds until the next one is due (or the poll interval)."""
        started = time.monotonic()
        now_ms, records, states = await self._read()
        deadline = now_ms + self.settings.poll_interval_ms
        for record, state in zip(records, states, strict=True):
            try:
                deadline = min(deadline, await self._handle(record, state, now_ms))
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

    async def _read(self) -> tuple[int, tuple[ScheduleRecord, ...], list[TickState]]:
        """The server clock, the active schedules and their tick states: one pipelined round
        trip, plus a read of the durable store and of the states when the schedules changed."""
        records = self.active.records
        pipe = self._hot_state.redis.pipeline(transaction=False)
        self._hot_state.queue_server_time(pipe, self.active.key)
        self.active.queue_version(pipe)
        for record in records:
            self.ticks.queue_state(pipe, record.schedule_id)
        server_time, _created, version, *replies = await pipe.execute()
        states = [self.ticks.state_of(reply) for reply in replies]
        if self.active.stale(version):
            records = await self.active.refresh(version)
            states = await self.ticks.states([record.schedule_id for record in records])
        return time_reply_ms(server_time), records, states

    async def _handle(self, record: ScheduleRecord, state: TickState, now_ms: int) -> int:
        """Fire what is due of one schedule; when its next tick is due (server ms)."""
        clock = tick_clock(record)
        floor = floor_ms(record)
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
