"""The local runtime instance scaler: create in-process capacity in a tenant's scope.

Owns the scale-out rule of seed 001: count existing instances by the tenant's
RuntimeInstanceIdPrefix (never the global host count, so a shared instance cannot satisfy
a dedicated tenant's request), refuse beyond MaxRuntimeInstances, and name new instances
`rt_<host>:<prefix>-<n>`. Must not dispatch or requeue runs.
"""

from __future__ import annotations

import asyncio
import re

from pydantic import BaseModel

from runtime_core.identity import ExecutionContextSnapshot, RuntimeInstanceId
from runtime_core.instances._instance import RuntimeInstance
from runtime_core.instances._models import RuntimeInstanceSettings
from runtime_core.instances._pool import LocalInstancePool
from runtime_core.instances._tenants import TenantRuntimeSettings

_RUNTIME_INSTANCE_ID_PREFIX = "rt_"  # the RuntimeInstanceId prefix of runtime_core.identity


class ScaleOutOutcome(BaseModel):
    fulfilled: bool
    runtime_instance_id: str | None = None
    reason: str
    active_instances: int


def local_instance_id(host: str, prefix: str, index: int) -> RuntimeInstanceId:
    return RuntimeInstanceId(f"{_RUNTIME_INSTANCE_ID_PREFIX}{host}:{prefix}-{index}")


class LocalInstanceScaler:
    def __init__(
        self, pool: LocalInstancePool, *, host: str = "localhost", heartbeat_interval_ms: int = 2_000
    ) -> None:
        self.pool = pool
        self.host = host
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._lock = asyncio.Lock()

    async def scale_out(
        self, tenant: TenantRuntimeSettings, snapshot: ExecutionContextSnapshot
    ) -> ScaleOutOutcome:
        async with self._lock:
            existing = self.pool.with_prefix(tenant.runtime_instance_id_prefix)
            if len(existing) >= tenant.max_runtime_instances:
                return ScaleOutOutcome(
                    fulfilled=False,
                    reason=f"'{tenant.runtime_instance_id_prefix}' already has {len(existing)} of "
                    f"{tenant.max_runtime_instances} runtime instances",
                    active_instances=len(existing),
                )
            runtime_instance_id = local_instance_id(
                self.host, tenant.runtime_instance_id_prefix, self._next_index(existing)
            )
            settings = RuntimeInstanceSettings.for_tenant(
                runtime_instance_id,
                tenant,
                snapshot,
                host=self.host,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
            )
            await self.pool.start_instance(settings)
        return ScaleOutOutcome(
            fulfilled=True,
            runtime_instance_id=runtime_instance_id,
            reason="local runtime instance started",
            active_instances=len(existing) + 1,
        )

    @staticmethod
    def _next_index(existing: list[RuntimeInstance]) -> int:
        numbers = [0]
        for instance in existing:
            match = re.search(r"-(\d+)$", instance.runtime_instance_id)
            if match:
                numbers.append(int(match.group(1)))
        return max(numbers) + 1
