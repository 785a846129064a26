"""The health marks of registered runtime instances in their registry records.

Owns the typed wrappers of `mark_instance_unsafe` and `mark_instance_recovered` (the only
place that knows their KEYS/ARGV order) and the reads the reconcilers start from: every
registered instance's heartbeat and health, and the Unsafe instances with the time they
were marked. Must not decide when to mark, nor touch any run.
"""

from __future__ import annotations

from dataclasses import dataclass
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
class UnsafeInstance:
    runtime_instance_id: str
    unsafe_at_ms: int
    provider_name: str | None


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

    async def unsafe_instances(self) -> list[UnsafeInstance]:
        unsafe = []
        for rid, (health, unsafe_at, descriptor) in await self._registered(
            "health", "unsafe_at_ms", "descriptor"
        ):
            if health == InstanceHealth.UNSAFE and unsafe_at is not None:
                provider = (
                    InstanceDescriptor.model_validate_json(descriptor).provider_name if descriptor else ""
                )
                unsafe.append(UnsafeInstance(rid, int(unsafe_at), provider or None))
        return unsafe

    async def mark_unsafe(self, runtime_instance_id: str, window_ms: int) -> UnsafeMarkOutcome:
        k = self.registry.keys(runtime_instance_id)
        reply = await self.hot_state.scripts["mark_instance_unsafe"](
            keys=[k.registry, k.capacity], args=[window_ms]
        )
        return UnsafeMarkOutcome(int(reply[0]))

    async def mark_recovered(self, runtime_instance_id: str, retention_ms: int) -> RecoveredMarkOutcome:
        """Recovered, capacity and reservations removed, out of the registry index."""
        k = self.registry.keys(runtime_instance_id)
        reply = await self.hot_state.scripts["mark_instance_recovered"](
            keys=[
                k.registry,
                k.capacity,
                k.reservations,
                recovery_claims_key(self.hot_state, runtime_instance_id),
            ],
            args=[retention_ms],
        )
        outcome = RecoveredMarkOutcome(int(reply[0]))
        if outcome is RecoveredMarkOutcome.MARKED:
            await self.hot_state.redis.srem(self.registry.index_key, runtime_instance_id)
        return outcome
