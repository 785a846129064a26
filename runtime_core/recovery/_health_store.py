"""The health marks of registered runtime instances in their registry records.

Owns the typed wrappers of `mark_instance_unsafe`, `mark_instance_recovered` and
`close_predecessors` (the only place that knows their KEYS/ARGV order) and the reads the
reconcilers start from: every registered instance's heartbeat and health, and the dead
incarnations whose work recovery must take over (an Unsafe instance: all of its local runs;
a live instance whose id a new incarnation took over: its predecessors' local runs), with
the cutoff their claims were made before. Must not decide when to mark, nor touch any run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from runtime_core.hot_state import HotState
from runtime_core.instances import InstanceDescriptor, InstanceHealth, InstanceRegistry
from runtime_core.recovery._keys import recovery_claims_key


class UnsafeMarkOutcome(Enum):
    MARKED = 1
    FRESH = 0
    NOT_HEALTHY = -1
    NOT_REGISTERED = -2


class RecoveredMarkOutcome(Enum):
    MARKED = 1
    NOT_UNSAFE = 0
    NOT_REGISTERED = -1


@dataclass(frozen=True)
class InstanceHeartbeat:
    runtime_instance_id: str
    heartbeat_at_ms: int
    health: InstanceHealth
    now_ms: int

    @property
    def age_ms(self) -> int:
        return self.now_ms - self.heartbeat_at_ms


@dataclass(frozen=True)
class DeadIncarnations:
    """Work on one runtime instance id that recovery must take over.

    `live_incarnation` None: the whole instance is Unsafe (every local run on it is dead; its
    registered incarnation is `registered_incarnation`). Otherwise the instance is healthy and
    only local runs accepted by other incarnations are dead: the `predecessors` it superseded,
    each with the cutoff its claims were made before.
    """

    runtime_instance_id: str
    registered_incarnation: str
    cutoff_ms: int
    provider_name: str | None
    now_ms: int
    live_incarnation: str | None = None
    predecessors: dict[str, int] = field(default_factory=dict)

    def is_dead(self, incarnation: str) -> bool:
        return self.live_incarnation is None or incarnation != self.live_incarnation

    def cutoff_for(self, incarnation: str) -> int:
        """Steps claimed at or before this were claimed by that (dead) incarnation."""
        return self.predecessors.get(incarnation, self.cutoff_ms)


class InstanceHealthStore:
    def __init__(self, registry: InstanceRegistry) -> None:
        self.registry = registry

    @property
    def hot_state(self) -> HotState:
        return self.registry.hot_state

    async def _registered(self, *fields: str) -> list[tuple[str, list[str | None]]]:
        ids = sorted(await self.hot_state.redis.smembers(self.registry.index_key))
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for runtime_instance_id in ids:
            pipe.hmget(self.registry.keys(runtime_instance_id).registry, list(fields))
        return list(zip(ids, await pipe.execute(), strict=True)) if ids else []

    async def heartbeats(self) -> list[InstanceHeartbeat]:
        """Heartbeat and health of every registered instance, with the Redis server time."""
        now = await self.hot_state.server_time_ms()
        return [
            InstanceHeartbeat(rid, int(heartbeat), InstanceHealth(health or InstanceHealth.HEALTHY), now)
            for rid, (heartbeat, health) in await self._registered("heartbeat_at_ms", "health")
            if heartbeat is not None
        ]

    async def dead_incarnations(self) -> list[DeadIncarnations]:
        """Unsafe instances, and healthy ones with superseded predecessors, in id order."""
        rows = await self._registered("health", "unsafe_at_ms", "descriptor", "incarnation")
        if not rows:
            return []
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for rid, _fields in rows:
            pipe.hgetall(self.registry.keys(rid).predecessors)
        predecessors = await pipe.execute()
        now = await self.hot_state.server_time_ms()  # (TIME cannot be pipelined on a Cluster)
        dead = []
        for (rid, (health, unsafe_at, descriptor, incarnation)), superseded in zip(
            rows, predecessors, strict=True
        ):
            provider = InstanceDescriptor.model_validate_json(descriptor).provider_name if descriptor else ""
            cutoffs = {name: int(cutoff) for name, cutoff in superseded.items()}
            common = {
                "runtime_instance_id": rid,
                "registered_incarnation": incarnation or "",
                "provider_name": provider or None,
                "now_ms": now,
                "predecessors": cutoffs,
            }
            if health == InstanceHealth.UNSAFE and unsafe_at is not None:
                dead.append(DeadIncarnations(cutoff_ms=int(unsafe_at), **common))
            elif (health or InstanceHealth.HEALTHY) == InstanceHealth.HEALTHY and cutoffs:
                dead.append(
                    DeadIncarnations(
                        cutoff_ms=max(cutoffs.values()), live_incarnation=incarnation or "", **common
                    )
                )
        return dead

    async def mark_unsafe(self, runtime_instance_id: str, window_ms: int) -> UnsafeMarkOutcome:
        k = self.registry.keys(runtime_instance_id)
        reply = await self.hot_state.scripts["mark_instance_unsafe"](
            keys=[k.registry, k.capacity], args=[window_ms]
        )
        return UnsafeMarkOutcome(int(reply[0]))

    async def mark_recovered(
        self, runtime_instance_id: str, incarnation: str, retention_ms: int
    ) -> RecoveredMarkOutcome:
        """Recovered, capacity and reservations removed, out of the registry index (only while
        `incarnation` is still the registered, Unsafe one)."""
        k = self.registry.keys(runtime_instance_id)
        reply = await self.hot_state.scripts["mark_instance_recovered"](
            keys=[
                k.registry,
                k.capacity,
                k.reservations,
                recovery_claims_key(self.hot_state, runtime_instance_id),
                k.predecessors,
            ],
            args=[retention_ms, incarnation],
        )
        outcome = RecoveredMarkOutcome(int(reply[0]))
        if outcome is RecoveredMarkOutcome.MARKED:
            await self.hot_state.redis.srem(self.registry.index_key, runtime_instance_id)
        return outcome

    async def close_predecessors(
        self, runtime_instance_id: str, live_incarnation: str, predecessors: list[str]
    ) -> int:
        """Forget superseded incarnations whose work was taken over; how many were forgotten."""
        if not predecessors:
            return 0
        k = self.registry.keys(runtime_instance_id)
        reply = await self.hot_state.scripts["close_predecessors"](
            keys=[k.registry, k.predecessors], args=[live_incarnation, *predecessors]
        )
        return int(reply[0])
