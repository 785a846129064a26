"""Runtime instance registry and capacity store in Redis, with heartbeats.

Owns registration by incarnation (Lua `register_instance`: a new start of an instance takes
its id's registration over from a predecessor, whose work recovery then takes over; index
SET), heartbeat publication of the registry descriptor and the capacity descriptor (Lua
`publish_capacity`, server time, out-of-order publishes of one incarnation ignored, a
superseded or Unsafe incarnation refused: fenced, freed capacity announced on pub/sub),
retirement on a clean stop (Lua `retire_instance`: removed, or handed over to recovery
when local runs are left),
unregistration, and listing joined entries filtered by tenant visibility (an entry is live
only while its heartbeat is fresh and the health reconciler has not marked it Unsafe).
Must not decide admission or create instances.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from runtime_core.errors import ConflictError, NotFoundError
from runtime_core.events import RunEventKeys
from runtime_core.hot_state import HotState, time_reply_ms
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._keys import InstanceKeys, instance_index_key
from runtime_core.instances._models import (
    CapacityDescriptor,
    InstanceDescriptor,
    InstanceEntry,
    InstanceHealth,
)
from runtime_core.instances._tenants import TenantSettingsCatalog
from runtime_core.instances._visibility import is_instance_visible

DEFAULT_STALE_AFTER_MS = 10_000


class HeartbeatOutcome(Enum):
    PUBLISHED = 1
    OUT_OF_ORDER = 0
    SUPERSEDED = -1  # another incarnation registered the instance id since
    UNSAFE = -2  # the health reconciler marked this incarnation Unsafe (or Recovered)
    NOT_REGISTERED = -3  # no registration at all: the Redis dataset was lost, or it expired

    @property
    def fenced(self) -> bool:
        """The incarnation lost its registration for good: it must stop taking work."""
        return self in (HeartbeatOutcome.SUPERSEDED, HeartbeatOutcome.UNSAFE)


@dataclass(frozen=True)
class Heartbeat:
    outcome: HeartbeatOutcome
    detail: str = ""


class RetireOutcome(Enum):
    REMOVED = 1
    HANDED_OVER = 2  # marked Unsafe (stopped): recovery takes its unfinished runs over
    NOT_HELD = 0  # another incarnation holds the registration, or this one is fenced


def fenced_registration(runtime_instance_id: str, incarnation: str, detail: str) -> ConflictError:
    return ConflictError(
        f"Runtime instance '{runtime_instance_id}' incarnation '{incarnation}' is fenced ({detail}): "
        "it takes no more work.",
        hint="Its work was (or is being) recovered onto live capacity; start a new incarnation.",
    )


class InstanceRegistry:
    """Registry + capacity descriptors of every runtime instance sharing this Redis prefix."""

    def __init__(
        self,
        hot_state: HotState,
        tenants: TenantSettingsCatalog,
        *,
        stale_after_ms: int = DEFAULT_STALE_AFTER_MS,
    ) -> None:
        self.hot_state = hot_state
        self.tenants = tenants
        # Where a heartbeat that freed capacity announces it (see `RunEventSubscriber.on_capacity`).
        self.capacity_channel = RunEventKeys(hot_state).capacity_channel
        self.stale_after_ms = stale_after_ms

    def keys(self, runtime_instance_id: str) -> InstanceKeys:
        return InstanceKeys.of(self.hot_state, runtime_instance_id)

    @property
    def index_key(self) -> str:
        """The SET of registered runtime instance ids."""
        return instance_index_key(self.hot_state)

    async def register(
        self, descriptor: InstanceDescriptor, capacity: CapacityDescriptor, version: int
    ) -> str | None:
        """Register `descriptor.incarnation`, taking the id over from any predecessor.

        Returns the superseded predecessor incarnation (its work is recovery's now), or None.
        A fenced incarnation (Unsafe or Recovered) cannot register again: ConflictError.
        """
        rid, incarnation = descriptor.runtime_instance_id, descriptor.incarnation
        k = self.keys(rid)
        reply = await self.hot_state.scripts["register_instance"](
            keys=[k.registry, k.capacity, k.reservations, k.predecessors],
            args=[incarnation, version, *_publication(descriptor, capacity)],
        )
        if int(reply[0]) != 1:
            raise fenced_registration(rid, incarnation, str(reply[2]))
        await self.hot_state.redis.sadd(instance_index_key(self.hot_state), rid)
        return str(reply[2]) or None

    async def heartbeat(
        self,
        descriptor: InstanceDescriptor,
        capacity: CapacityDescriptor,
        version: int,
        counted: Sequence[str] = (),
    ) -> Heartbeat:
        """Publish both descriptors with Redis time, unless this incarnation was fenced; the
        reservations of `counted` (shared runs the capacity already counts) are released."""
        k = self.keys(descriptor.runtime_instance_id)
        reply = await self.hot_state.coalesced("publish_capacity")(
            keys=[k.registry, k.capacity, k.reservations],
            args=[
                descriptor.incarnation,
                version,
                *_publication(descriptor, capacity),
                json.dumps(list(counted)),
                self.capacity_channel,
                descriptor.runtime_instance_id,
            ],
        )
        return Heartbeat(HeartbeatOutcome(int(reply[0])), str(reply[2]) if len(reply) > 2 else "")

    async def ensure_indexed(self, runtime_instance_id: str) -> None:
        """Keep a live registration listed (a reconciler closing a predecessor may have dropped it)."""
        await self.hot_state.redis.sadd(instance_index_key(self.hot_state), runtime_instance_id)

    async def retire(self, runtime_instance_id: str, incarnation: str, *, unfinished: bool) -> RetireOutcome:
        """A clean stop: remove the registration, or hand `unfinished` local runs to recovery."""
        k = self.keys(runtime_instance_id)
        reply = await self.hot_state.scripts["retire_instance"](
            keys=[k.registry, k.capacity, k.reservations, k.predecessors],
            args=[incarnation, 1 if unfinished else 0],
        )
        outcome = RetireOutcome(int(reply[0]))
        if outcome is RetireOutcome.REMOVED:
            await self.hot_state.redis.srem(instance_index_key(self.hot_state), runtime_instance_id)
        return outcome

    async def descriptor(self, runtime_instance_id: str) -> InstanceDescriptor:
        """The registry record alone (one HGET): how providers find an instance's endpoint."""
        raw = await self.hot_state.redis.hget(self.keys(runtime_instance_id).registry, "descriptor")
        if raw is None:
            raise NotFoundError(
                f"Runtime instance '{runtime_instance_id}' is not registered.",
                hint="It stopped or never registered; list the registered instances.",
            )
        return InstanceDescriptor.model_validate_json(raw)

    async def unregister(self, runtime_instance_id: str) -> None:
        """Remove the id's registration whoever holds it (operators, tests); instances `retire`."""
        k = self.keys(runtime_instance_id)
        await self.hot_state.redis.srem(instance_index_key(self.hot_state), runtime_instance_id)
        await self.hot_state.redis.delete(k.registry, k.capacity, k.reservations, k.predecessors)

    async def entries(self) -> list[InstanceEntry]:
        """Every registered instance (any tenant): for readiness, scaling and operators' tools."""
        index = instance_index_key(self.hot_state)

        def listing(pipe: Any) -> None:
            pipe.smembers(index)
            self.hot_state.queue_server_time(pipe, index)

        # Both reads share their round trips with concurrent calls (coalesced).
        members, time_reply = await self.hot_state.coalescer.commands(listing)
        ids = sorted(members)
        if not ids:
            return []
        now = time_reply_ms(time_reply)

        def descriptors(pipe: Any) -> None:
            for runtime_instance_id in ids:
                k = self.keys(runtime_instance_id)
                pipe.hgetall(k.registry)
                pipe.hmget(k.capacity, "capacity", "heartbeat_at_ms")
                pipe.zcount(k.reservations, now + 1, "+inf")

        replies = await self.hot_state.coalescer.commands(descriptors)
        entries = []
        for i in range(len(ids)):
            registry, capacity, reserved = replies[3 * i : 3 * i + 3]
            if registry and capacity[0]:
                entries.append(self._entry(registry, capacity, int(reserved), now))
        return entries

    def _entry(self, registry: dict[str, str], capacity: list[str], reserved: int, now: int) -> InstanceEntry:
        heartbeat = int(registry["heartbeat_at_ms"])
        published = CapacityDescriptor.model_validate_json(capacity[0])
        health = InstanceHealth(registry.get("health") or InstanceHealth.HEALTHY)
        return InstanceEntry(
            descriptor=InstanceDescriptor.model_validate(json.loads(registry["descriptor"])),
            capacity=published.model_copy(update={"snapshot_at_ms": int(capacity[1])}),
            registered_at_ms=int(registry["registered_at_ms"]),
            heartbeat_at_ms=heartbeat,
            live=health is InstanceHealth.HEALTHY and now - heartbeat <= self.stale_after_ms,
            reserved_slots=reserved,
            health=health,
        )

    def is_visible(self, entry: InstanceEntry, snapshot: ExecutionContextSnapshot) -> bool:
        d = entry.descriptor
        tenant = self.tenants.resolve(snapshot.tenant_id)
        return is_instance_visible(d.isolation_mode, d.tenant_id, d.tenant_group_id, snapshot, tenant)

    async def visible_entries(self, snapshot: ExecutionContextSnapshot) -> list[InstanceEntry]:
        """Registry/capacity listing as the snapshot's tenant may see it."""
        return [entry for entry in await self.entries() if self.is_visible(entry, snapshot)]

    async def visible_entry(
        self, runtime_instance_id: str, snapshot: ExecutionContextSnapshot
    ) -> InstanceEntry:
        for entry in await self.visible_entries(snapshot):
            if entry.runtime_instance_id == runtime_instance_id:
                return entry
        raise NotFoundError(
            f"Runtime instance '{runtime_instance_id}' not found.",
            hint="List the runtime instances visible to your tenant with instances.list.",
        )


def _publication(descriptor: InstanceDescriptor, capacity: CapacityDescriptor) -> list[str | int]:
    """ARGV tail shared by `register_instance` and `publish_capacity`."""
    return [
        descriptor.model_dump_json(),
        capacity.model_dump_json(),
        1 if capacity.can_accept_run else 0,
        capacity.available_run_slots,
    ]
