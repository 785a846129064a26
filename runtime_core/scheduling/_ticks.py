"""The Redis side of schedules: which tick is handled, claimed, waiting, and the last run.

Owns the per-schedule tick state hash (`{prefix}{sched:<id>}:ticks`, one Cluster slot per
schedule), its reads (queued on a pass's pipeline: many schedules, one round trip) and the
typed wrappers of its three transitions: `schedule_claim_tick` (one claimer per tick, in
tick order, with a lease another scheduler takes over when it ends), `schedule_settle_tick`
(the tick is handled; under queue_one it may wait) and `schedule_release_queued` (the
waiting tick becomes a claim). Python never writes the fields these scripts guard. Must not
decide which ticks to fire (`_timing`) or fire them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from runtime_core.hot_state import HotState

TICK_KIND_SCHEDULED = "scheduled"
TICK_KIND_CATCH_UP = "catch_up"
TICK_KIND_QUEUED = "queued"
TICK_KIND_MANUAL = "manual"


class ClaimOutcome(IntEnum):
    ALREADY_HANDLED = 0
    CLAIMED = 1
    BUSY = 2
    TAKEN_OVER = 3
    PLAN_AGAIN = 4


class SettleOutcome(IntEnum):
    LOST = 0
    SETTLED = 1
    QUEUED = 2
    DROPPED = 3


@dataclass(frozen=True)
class TickState:
    """What a pass reads before planning: newest handled tick, a claim in flight, a waiting tick."""

    fired_ms: int
    pending_ms: int | None
    pending_until_ms: int | None
    queued_ms: int | None
    last_run_id: str | None

    def watermark(self, floor_ms: int) -> int:
        return max(self.fired_ms, floor_ms)


@dataclass(frozen=True)
class TickClaim:
    """A claim's answer; `tick_ms` / `kind` name the tick to fire when the caller won one."""

    outcome: ClaimOutcome
    fired_ms: int
    tick_ms: int | None = None
    kind: str = TICK_KIND_SCHEDULED
    last_run_id: str | None = None

    @property
    def won(self) -> bool:
        return self.outcome in (ClaimOutcome.CLAIMED, ClaimOutcome.TAKEN_OVER)


_STATE_FIELDS = ["fired", "pending", "pending_until", "queued", "last_run"]


def _int(value: str | None) -> int | None:
    return int(value) if value else None


class ScheduleTicks:
    def __init__(self, hot_state: HotState, *, lease_ms: int) -> None:
        self._hot_state = hot_state
        self._redis = hot_state.redis
        self.lease_ms = lease_ms
        self._claim = hot_state.scripts["schedule_claim_tick"]
        self._settle = hot_state.scripts["schedule_settle_tick"]
        self._release = hot_state.scripts["schedule_release_queued"]

    def key(self, schedule_id: str) -> str:
        return self._hot_state.tagged(f"sched:{schedule_id}", "ticks")

    def queue_state(self, pipe: Any, schedule_id: str) -> None:
        """Queue the read of one schedule's TickState on `pipe` (its reply: `state_of`)."""
        pipe.hmget(self.key(schedule_id), _STATE_FIELDS)

    @staticmethod
    def state_of(reply: list[str | None]) -> TickState:
        fired, pending, until, queued, last_run = reply
        return TickState(int(fired or 0), _int(pending), _int(until), _int(queued), last_run or None)

    async def states(self, schedule_ids: list[str]) -> list[TickState]:
        """The TickState of each schedule, in order, in one pipelined read."""
        pipe = self._redis.pipeline(transaction=False)
        for schedule_id in schedule_ids:
            self.queue_state(pipe, schedule_id)
        return [self.state_of(reply) for reply in await pipe.execute()] if schedule_ids else []

    async def claim(
        self, schedule_id: str, tick_ms: int, *, planned_from_ms: int, floor_ms: int, owner: str, kind: str
    ) -> TickClaim:
        reply = await self._claim(
            keys=[self.key(schedule_id)],
            args=[tick_ms, planned_from_ms, floor_ms, owner, self.lease_ms, kind],
        )
        outcome, fired = ClaimOutcome(int(reply[0])), int(reply[1])
        if outcome is ClaimOutcome.CLAIMED:
            return TickClaim(outcome, fired, tick_ms, kind, reply[2] or None)
        if outcome is ClaimOutcome.TAKEN_OVER:
            return TickClaim(outcome, fired, int(reply[2]), reply[3], reply[4] or None)
        return TickClaim(outcome, fired)

    async def settle(
        self, schedule_id: str, tick_ms: int, owner: str, *, run_id: str | None = None, queue: bool = False
    ) -> SettleOutcome:
        reply = await self._settle(
            keys=[self.key(schedule_id)], args=[tick_ms, owner, run_id or "", "1" if queue else "0"]
        )
        return SettleOutcome(int(reply))

    async def release_queued(self, schedule_id: str, tick_ms: int, owner: str) -> TickClaim | None:
        reply = await self._release(keys=[self.key(schedule_id)], args=[tick_ms, owner, self.lease_ms])
        if int(reply[0]) != 1:
            return None
        return TickClaim(ClaimOutcome.CLAIMED, tick_ms, tick_ms, TICK_KIND_QUEUED, reply[1] or None)

    async def forget(self, schedule_id: str) -> None:
        """A deleted schedule's tick state goes with it."""
        await self._redis.delete(self.key(schedule_id))
