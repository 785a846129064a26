"""RuntimeHealthReconciler: suppress runtime capacity whose heartbeat lapsed.

Owns one pass (`reconcile_once`): every registered Healthy instance whose heartbeat (Redis
server time) is older than the health window is marked Unsafe through Lua, which takes it
out of admission at once. Health and recovery are separate: this never touches a run, a
queue item or DAG state; the execution recovery reconciler takes over the work.
"""

from __future__ import annotations

import logging

from runtime_core.instances import InstanceHealth
from runtime_core.recovery._health_store import InstanceHealthStore, UnsafeMarkOutcome

log = logging.getLogger("runtime_core.recovery")


class RuntimeHealthReconciler:
    def __init__(self, health: InstanceHealthStore, *, window_ms: int) -> None:
        self.health = health
        self.window_ms = window_ms

    async def reconcile_once(self) -> list[str]:
        """The runtime instance ids this pass marked Unsafe."""
        marked = []
        for beat in await self.health.heartbeats():
            if beat.health is not InstanceHealth.HEALTHY or beat.age_ms <= self.window_ms:
                continue
            outcome = await self.health.mark_unsafe(beat.runtime_instance_id, self.window_ms)
            if outcome is UnsafeMarkOutcome.MARKED:
                log.warning(
                    "instance.unsafe",
                    extra={"runtime_instance_id": beat.runtime_instance_id, "heartbeat_age_ms": beat.age_ms},
                )
                marked.append(beat.runtime_instance_id)
        return marked
