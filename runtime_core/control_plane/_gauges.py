"""The cluster-wide gauges a control plane exports: queue depth and age, shared runs, instances.

Owns what these gauges mean and their labels: `mcprt_queue_depth` (Pending shared-queue
items), `mcprt_queue_oldest_age_seconds` (how long the oldest Pending run has been queued, per
admission group), `mcprt_shared_runs` (shared run records held in Redis, by status) and
`mcprt_registered_instances` (registry entries by health and liveness). Tenant ids appear as
labels (`tenant`, and `tenant_group` for the queue age) only when the operator enables tenant
labels; without them the queue age is the oldest of every group. They are read from Redis at
scrape time and cached by the exposition. Several control planes on one Redis report the same
values: aggregate them with `max`, not `sum`. Must not write anything.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from runtime_core.control_plane._parts import ControlPlaneParts
from runtime_core.instances import admission_group_tenant
from runtime_core.observability import CachedGauges, GaugeFamily, GaugeValues, ObservabilitySettings
from runtime_core.queueing import PendingGroup

_T = TypeVar("_T")


class _SharedRead(Generic[_T]):
    """One read shared by the gauges refreshed together: a caller arriving while it runs
    awaits the same read instead of starting another (CachedGauges reads families at once)."""

    def __init__(self, read: Callable[[], Awaitable[_T]]) -> None:
        self._read = read
        self._running: asyncio.Task[_T] | None = None

    async def __call__(self) -> _T:
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._read())
        return await asyncio.shield(self._running)


def control_plane_gauges(parts: ControlPlaneParts, settings: ObservabilitySettings) -> CachedGauges:
    by_tenant = settings.metrics_tenant_labels
    tenant_label = ("tenant",) if by_tenant else ()
    pending_groups = _SharedRead(parts.queue.pending_groups)

    async def queue_depth() -> GaugeValues:
        counts: Counter[tuple[str, ...]] = Counter() if by_tenant else Counter({(): 0})
        for group, pending in (await pending_groups()).items():
            tenant = admission_group_tenant(group)
            if tenant is not None:
                counts[(tenant,) if by_tenant else ()] += pending.count
        return {labels: float(count) for labels, count in counts.items()}

    async def oldest_age() -> GaugeValues:
        groups, now_ms = await asyncio.gather(pending_groups(), parts.hot_state.server_time_ms())
        return _oldest_ages(groups, now_ms, by_tenant)

    async def shared_runs() -> GaugeValues:
        counts: Counter[tuple[str, ...]] = Counter()
        for (tenant, status), count in (await parts.runs.count_by_status()).items():
            counts[(status, tenant) if by_tenant else (status,)] += count
        return {labels: float(count) for labels, count in counts.items()}

    async def registered_instances() -> GaugeValues:
        counts: Counter[tuple[str, ...]] = Counter()
        for entry in await parts.registry.entries():
            owner = (entry.capacity.tenant_id or "",) if by_tenant else ()
            counts[(entry.health.value, str(entry.live).lower(), *owner)] += 1
        return {labels: float(count) for labels, count in counts.items()}

    families = [
        GaugeFamily(
            "mcprt_queue_depth",
            "Shared runs waiting in the shared queue (Pending).",
            tenant_label,
            queue_depth,
        ),
        GaugeFamily(
            "mcprt_queue_oldest_age_seconds",
            "How long the oldest Pending shared run has been queued, per admission group (0: none).",
            ("tenant", "tenant_group") if by_tenant else (),
            oldest_age,
        ),
        GaugeFamily(
            "mcprt_shared_runs",
            "Shared run records held in Redis, by shared status.",
            ("status", *tenant_label),
            shared_runs,
        ),
        GaugeFamily(
            "mcprt_registered_instances",
            "Runtime instances in the registry, by health and heartbeat liveness.",
            ("health", "live", *tenant_label),
            registered_instances,
        ),
    ]
    return CachedGauges(families, ttl_s=settings.metrics_cache_s)


def _oldest_ages(groups: dict[str, PendingGroup], now_ms: int, by_tenant: bool) -> GaugeValues:
    """Seconds since the oldest Pending run of each admission group (a JSON [tenant, group]) was
    first queued; without tenant labels one value, the oldest of all (0 when nothing waits)."""
    ages = {group: max(0, now_ms - pending.oldest_enqueued_at_ms) / 1000 for group, pending in groups.items()}
    if not by_tenant:
        return {(): max(ages.values(), default=0.0)}
    return {_group_labels(group): age for group, age in ages.items()}


def _group_labels(group: str) -> tuple[str, str]:
    """(tenant, tenant group) of an admission group value (`instances.admission_group`)."""
    try:
        tenant, tenant_group = json.loads(group)
    except (ValueError, TypeError):
        return group, ""
    return str(tenant), str(tenant_group or "")
