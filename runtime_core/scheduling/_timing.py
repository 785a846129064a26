"""Tick arithmetic: which instants a schedule fires at, and which of them a pass fires now.

Owns `TickClock` (a spec's ticks as epoch milliseconds: croniter over the schedule's IANA
zone, so daylight-saving transitions follow croniter's rules; or anchor + k x interval) and
`plan_ticks` (given the newest handled tick and the server time: the missed ticks the
catch-up policy keeps, then the ticks still within the misfire grace), a stored schedule's
clock and floor, and the epoch-millisecond <-> datetime conversions. Pure functions of their
arguments: must not read clocks or stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from croniter import croniter

from runtime_core.scheduling._spec import CatchUpPolicy, ScheduleSpec, cron_fields
from runtime_core.storage import ScheduleRecord

MAX_TICKS_PER_PASS = 1000


def epoch_ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def utc_at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@dataclass(frozen=True)
class TickClock:
    """The ticks of `spec`; an interval schedule ticks at anchor + k x interval (k >= 1)."""

    spec: ScheduleSpec
    anchor_ms: int

    def _cron(self, start_ms: int) -> croniter:
        assert self.spec.cron is not None
        start = datetime.fromtimestamp(start_ms / 1000, tz=self.spec.zone)
        return croniter(self.spec.cron, start, second_at_beginning=cron_fields(self.spec.cron) == 6)

    @property
    def _step(self) -> int:
        assert self.spec.interval_seconds is not None
        return self.spec.interval_seconds * 1000

    def next_after(self, after_ms: int) -> int:
        """The first tick strictly after `after_ms`."""
        if self.spec.cron is not None:
            return epoch_ms(self._cron(after_ms).get_next(datetime))
        k = max(1, (after_ms - self.anchor_ms) // self._step + 1)
        return self.anchor_ms + k * self._step

    def ticks_between(self, after_ms: int, until_ms: int, limit: int = MAX_TICKS_PER_PASS) -> list[int]:
        """The first `limit` ticks in (after_ms, until_ms], ascending."""
        ticks: list[int] = []
        tick = self.next_after(after_ms)
        while tick <= until_ms and len(ticks) < limit:
            ticks.append(tick)
            tick = self.next_after(tick)
        return ticks

    def latest_between(self, after_ms: int, until_ms: int, count: int) -> list[int]:
        """The last `count` ticks in (after_ms, until_ms], ascending (never walks the whole span)."""
        if self.spec.cron is not None:
            cron = self._cron(until_ms + 1)
            found: list[int] = []
            while len(found) < count:
                tick = epoch_ms(cron.get_prev(datetime))
                if tick <= after_ms:
                    break
                found.append(tick)
            return found[::-1]
        last = (until_ms - self.anchor_ms) // self._step
        first = max(1, (after_ms - self.anchor_ms) // self._step + 1, last - count + 1)
        return [self.anchor_ms + k * self._step for k in range(first, last + 1)]


def tick_clock(record: ScheduleRecord) -> TickClock:
    """A stored schedule's ticks (an interval schedule is anchored at its creation)."""
    return TickClock(ScheduleSpec.model_validate(record.spec), epoch_ms(record.created_at))


def floor_ms(record: ScheduleRecord) -> int:
    """No tick at or before this fires: the newest handled one, or the creation / resume time."""
    handled = epoch_ms(record.last_tick_at) if record.last_tick_at is not None else 0
    return max(handled, epoch_ms(record.status_changed_at))


@dataclass(frozen=True)
class PlannedTick:
    tick_ms: int
    catch_up: bool


def plan_ticks(clock: TickClock, watermark_ms: int, now_ms: int, misfire_grace_ms: int) -> list[PlannedTick]:
    """The ticks to fire now, oldest first, after the newest handled tick `watermark_ms`.

    A tick older than `now_ms - misfire_grace_ms` was missed (no scheduler saw it in time):
    the catch-up policy keeps none of them (`skip`), the latest (`run_once`) or the latest
    `backfill_limit` (`backfill`). Younger ticks are on time and all fire.
    """
    missed_until = now_ms - misfire_grace_ms
    planned: list[PlannedTick] = []
    if missed_until > watermark_ms:
        keep = {
            CatchUpPolicy.SKIP: 0,
            CatchUpPolicy.RUN_ONCE: 1,
            CatchUpPolicy.BACKFILL: clock.spec.backfill_limit,
        }[clock.spec.catch_up]
        if keep:
            planned += [PlannedTick(t, True) for t in clock.latest_between(watermark_ms, missed_until, keep)]
    on_time_after = max(watermark_ms, missed_until)
    planned += [PlannedTick(t, False) for t in clock.ticks_between(on_time_after, now_ms)]
    return planned
