"""One incarnation's hold on its runtime instance id's registration.

Owns the incarnation token (new per start), the heartbeat version sequence (compared only
within the incarnation), the dataset epoch the incarnation works in, registering (taking the
id over from a predecessor), heartbeats and the verdict they carry (published, fenced, or no
registration at all), registering again in a new dataset after a lost one, and retiring on a
clean stop. Also owns which accepted shared runs still hold a dispatcher's slot reservation
(released by the first heartbeat whose capacity counts them) and letting a caller that only
needs a fresh verdict join the heartbeat already in flight instead of sending another, and
callers publishing at the same time sharing one publication. Must
not touch local runs: the instance acts on the verdicts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runtime_core.hot_state import dataset_epoch, read_outcome
from runtime_core.identity import new_incarnation_id
from runtime_core.instances._models import CapacityDescriptor, InstanceDescriptor
from runtime_core.instances._registry import Heartbeat, HeartbeatOutcome, InstanceRegistry, RetireOutcome

Describe = Callable[[], tuple[InstanceDescriptor, CapacityDescriptor]]


class Incarnation:
    """`id` is "" until `register()`; `describe` returns the descriptors to publish now."""

    def __init__(self, registry: InstanceRegistry, runtime_instance_id: str, describe: Describe) -> None:
        self.registry = registry
        self.runtime_instance_id = runtime_instance_id
        self.describe = describe
        self.id = ""
        self.epoch = ""
        self._version = 0
        self._lock = asyncio.Lock()
        self._counted: set[str] = set()  # accepted shared runs whose reservation is still held
        self._in_flight: asyncio.Future[Heartbeat] | None = None
        self._following: asyncio.Future[Heartbeat] | None = None  # the next publication

    async def register(self) -> str | None:
        """Start a new incarnation; returns the predecessor incarnation it took over, if any."""
        self.id = new_incarnation_id()
        self.epoch = await dataset_epoch(self.registry.hot_state)
        return await self._register()

    async def _register(self) -> str | None:
        async with self._lock:
            self._version += 1
            descriptor, capacity = self.describe()
            return await self.registry.register(descriptor, capacity, self._version)

    def counted(self, shared_run_id: str) -> None:
        """An accepted shared run: the next heartbeat's capacity counts it, so that heartbeat
        releases the slot its dispatcher reserved."""
        self._counted.add(shared_run_id)

    async def heartbeat(self, *, join_in_flight: bool = False) -> Heartbeat:
        """Publish the descriptors as they are from now on. Callers meanwhile share one
        publication (group commit): while one is in flight, every caller waits for the next,
        which describes the instance once that one is back, so it includes all their changes.
        `join_in_flight`: a heartbeat already on its way is good enough (the caller wants a
        verdict newer than its own wake-up, not a publication of a change it made)."""
        in_flight = self._in_flight
        if join_in_flight and in_flight is not None:
            return await asyncio.shield(in_flight)
        following = self._following
        if following is None or following.done():  # done: ended before it described anything
            following = self._following = asyncio.ensure_future(self._publish_following())
            # Its outcome is read by every caller; all of them cancelled meanwhile must not
            # leave an unread exception behind.
            following.add_done_callback(read_outcome)
        return await asyncio.shield(following)

    async def _publish_following(self) -> Heartbeat:
        async with self._lock:
            self._following = None  # callers from now on need a later description
            self._version += 1
            descriptor, capacity = self.describe()
            counted = sorted(self._counted)
            beat = asyncio.ensure_future(
                self.registry.heartbeat(descriptor, capacity, self._version, counted)
            )
            beat.add_done_callback(read_outcome)
            self._in_flight = beat
            try:
                result = await beat
            finally:
                if self._in_flight is beat:
                    self._in_flight = None
            if result.outcome in (HeartbeatOutcome.PUBLISHED, HeartbeatOutcome.OUT_OF_ORDER):
                self._counted.difference_update(counted)
            return result

    async def changed_epoch(self) -> str | None:
        """The current dataset's epoch when it is not the one this incarnation works in."""
        epoch = await dataset_epoch(self.registry.hot_state)
        return None if epoch == self.epoch else epoch

    async def join(self, epoch: str) -> None:
        """Work in the dataset of `epoch` (the previous one was lost): register in it again."""
        self.epoch = epoch
        await self._register()

    async def keep_listed(self) -> None:
        await self.registry.ensure_indexed(self.runtime_instance_id)

    async def retire(self, *, unfinished: bool) -> RetireOutcome:
        return await self.registry.retire(self.runtime_instance_id, self.id, unfinished=unfinished)
