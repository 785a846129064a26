"""The cluster-wide gauges a control plane exports: queue depth, shared runs, registered instances.

Owns what these gauges mean and their labels: `mcprt_queue_depth` (Pending shared-queue
items), `mcprt_shared_runs` (shared run records held in Redis, by status) and
`mcprt_registered_instances` (registry entries by health and liveness), each with a `tenant`
label only when the operator enables tenant labels. They are read from Redis at scrape time
and cached by the exposition. Several control planes on one Redis report the same values:
aggregate them with `max`, not `sum`. Must not write anything.
"""

from __future__ import annotations

from collections import Counter

from runtime_core.control_plane._parts import ControlPlaneParts
from runtime_core.observability import CachedGauges, GaugeFamily, GaugeValues, ObservabilitySettings


def control_plane_gauges(parts: ControlPlaneParts, settings: ObservabilitySettings) -> CachedGauges:
    by_tenant = settings.metrics_tenant_labels
    tenant_label = ("tenant",) if by_tenant else ()

    async def queue_depth() -> GaugeValues:
        pending = await parts.queue.pending_count_by_tenant()
        if by_tenant:
            return {(tenant,): float(count) for tenant, count in pending.items()}
        return {(): float(sum(pending.values()))}

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
