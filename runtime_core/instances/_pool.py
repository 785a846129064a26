"""The in-process pool of runtime instances hosted by this process (the local provider's hosts).

Owns starting, finding, counting (by RuntimeInstanceIdPrefix), restarting (a new incarnation
in place of a fenced or crashed one) and stopping in-process RuntimeInstance objects. Must
not decide when to scale or where to dispatch.
"""

from __future__ import annotations

import asyncio

from runtime_core.errors import ConflictError, NotFoundError
from runtime_core.instances._dependencies import InstanceDependencies
from runtime_core.instances._instance import RuntimeInstance
from runtime_core.instances._models import RuntimeInstanceSettings


class LocalInstancePool:
    def __init__(self, deps: InstanceDependencies) -> None:
        self.deps = deps
        self._instances: dict[str, RuntimeInstance] = {}
        self._lock = asyncio.Lock()

    async def start_instance(self, settings: RuntimeInstanceSettings) -> RuntimeInstance:
        async with self._lock:
            if settings.runtime_instance_id in self._instances:
                raise ConflictError(f"Runtime instance '{settings.runtime_instance_id}' already runs here.")
            instance = RuntimeInstance(settings, self.deps)
            self._instances[settings.runtime_instance_id] = instance
        return await instance.start()

    async def restart_instance(self, runtime_instance_id: str) -> RuntimeInstance:
        """Start a new incarnation of a hosted instance id in place of the current object (a
        fenced one, or one whose loops died): the old one stops without retiring its
        registration, so its unfinished runs stay for recovery; the new one takes the id over."""
        async with self._lock:
            previous = self.get(runtime_instance_id)
            await previous.stop(unregister=False)
            instance = RuntimeInstance(previous.settings, self.deps)
            self._instances[runtime_instance_id] = instance
        return await instance.start()

    def get(self, runtime_instance_id: str) -> RuntimeInstance:
        instance = self._instances.get(runtime_instance_id)
        if instance is None:
            raise NotFoundError(
                f"Runtime instance '{runtime_instance_id}' is not hosted in this process.",
                hint="Use the provider named in the instance's registry metadata.",
            )
        return instance

    def hosts(self, runtime_instance_id: str) -> bool:
        return runtime_instance_id in self._instances

    def instances(self) -> list[RuntimeInstance]:
        return list(self._instances.values())

    def loops_alive(self) -> bool:
        """Every hosted instance's loops run (True with no instance: nothing is expected)."""
        return all(instance.loops_alive for instance in self._instances.values())

    def with_prefix(self, prefix: str) -> list[RuntimeInstance]:
        return [i for i in self._instances.values() if i.settings.runtime_instance_id_prefix == prefix]

    async def stop_all(self) -> None:
        instances, self._instances = list(self._instances.values()), {}
        await asyncio.gather(*(instance.stop() for instance in instances), return_exceptions=True)
        await self.deps.doorbell.aclose()
