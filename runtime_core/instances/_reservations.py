"""Admission reservations: a TTL-bound hold on one run slot of a runtime instance.

Owns the typed wrappers of `reserve_capacity` / `release_reservation` (the only place that
knows their KEYS/ARGV order). Must not select the instance: admission does that.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from runtime_core.hot_state import HotState
from runtime_core.instances._keys import InstanceKeys
from runtime_core.instances._registry import DEFAULT_STALE_AFTER_MS


class ReservationOutcome(Enum):
    RESERVED = 1
    ALREADY_HELD = 2
    FULL = 0
    NO_CAPACITY = -1
    STALE = -2
    NOT_ACCEPTING = -3

    @property
    def held(self) -> bool:
        return self in (ReservationOutcome.RESERVED, ReservationOutcome.ALREADY_HELD)


@dataclass(frozen=True)
class Reservation:
    """`incarnation`: the instance incarnation whose published capacity the slot was held in."""

    runtime_instance_id: str
    holder: str
    outcome: ReservationOutcome
    expires_at_ms: int = 0
    incarnation: str = ""


class ReservationStore:
    def __init__(self, hot_state: HotState, *, stale_after_ms: int = DEFAULT_STALE_AFTER_MS) -> None:
        self.hot_state = hot_state
        self.stale_after_ms = stale_after_ms

    async def reserve(self, runtime_instance_id: str, holder: str, ttl_ms: int) -> Reservation:
        k = InstanceKeys.of(self.hot_state, runtime_instance_id)
        # Coalesced: a pump cycle reserves for the runs it dispatches together in one round trip.
        reply = await self.hot_state.coalesced("reserve_capacity")(
            keys=[k.capacity, k.reservations], args=[holder, ttl_ms, self.stale_after_ms]
        )
        outcome = ReservationOutcome(int(reply[0]))
        if not outcome.held:
            return Reservation(runtime_instance_id, holder, outcome)
        incarnation = str(reply[3]) if len(reply) > 3 else ""
        return Reservation(runtime_instance_id, holder, outcome, int(reply[2]), incarnation)

    async def release(self, runtime_instance_id: str, holder: str) -> bool:
        k = InstanceKeys.of(self.hot_state, runtime_instance_id)
        released, _now = await self.hot_state.scripts["release_reservation"](
            keys=[k.reservations], args=[holder]
        )
        return int(released) == 1

    async def held_count(self, runtime_instance_id: str) -> int:
        k = InstanceKeys.of(self.hot_state, runtime_instance_id)
        now = await self.hot_state.server_time_ms()
        return int(await self.hot_state.redis.zcount(k.reservations, now + 1, "+inf"))
