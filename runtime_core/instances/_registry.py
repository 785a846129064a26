"""Runtime instance registry and capacity store in Redis, with heartbeats.

Owns registration (index SET), heartbeat publication of the registry descriptor and the
capacity descriptor (Lua `publish_capacity`, server time, out-of-order publishes ignored),
unregistration, and listing joined entries filtered by tenant visibility (an entry is live
only while its heartbeat is fresh and the health reconciler has not marked it Unsafe).
Must not decide admission or create instances.
"""

from __future__ import annotations

import json

from runtime_core.errors import NotFoundError
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
        self.stale_after_ms = stale_after_ms

    def keys(self, runtime_instance_id: str) -> InstanceKeys:
        return InstanceKeys.of(self.hot_state, runtime_instance_id)

    @property
    def index_key(self) -> str:
        """The SET of registered runtime instance ids."""
        return instance_index_key(self.hot_state)

    async def register(
        self, descriptor: InstanceDescriptor, capacity: CapacityDescriptor, version: int
    ) -> None:
        await self.hot_state.redis.sadd(instance_index_key(self.hot_state), descriptor.runtime_instance_id)
        await self.heartbeat(descriptor, capacity, version)

    async def heartbeat(
        self, descriptor: InstanceDescriptor, capacity: CapacityDescriptor, version: int
    ) -> bool:
        """Publish both descriptors with Redis time; False when a newer version was stored."""
        k = self.keys(descriptor.runtime_instance_id)
        published, _now = await self.hot_state.scripts["publish_capacity"](
            keys=[k.registry, k.capacity],
            args=[
                version,
                descriptor.model_dump_json(),
                capacity.model_dump_json(),
                1 if capacity.can_accept_run else 0,
                capacity.available_run_slots,
            ],
        )
        return int(published) == 1

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
        k = self.keys(runtime_instance_id)
        await self.hot_state.redis.srem(instance_index_key(self.hot_state), runtime_instance_id)
        await self.hot_state.redis.delete(k.registry, k.capacity, k.reservations)

    async def entries(self) -> list[InstanceEntry]:
        """Every registered instance (any tenant): for readiness, scaling and operators' tools."""
        listing = self.hot_state.redis.pipeline(transaction=False)
        listing.smembers(instance_index_key(self.hot_state))
        self.hot_state.queue_server_time(listing, instance_index_key(self.hot_state))
        members, time_reply = await listing.execute()
        ids = sorted(members)
        if not ids:
            return []
        now = time_reply_ms(time_reply)
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for runtime_instance_id in ids:
            k = self.keys(runtime_instance_id)
            pipe.hgetall(k.registry)
            pipe.hmget(k.capacity, "capacity", "heartbeat_at_ms")
            pipe.zcount(k.reservations, now + 1, "+inf")
        replies = await pipe.execute()
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
