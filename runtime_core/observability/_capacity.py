"""Capacity gauges of the runtime instances one process hosts, read from memory at scrape time.

Owns the names and labels of the per-instance capacity gauges (workers, run slots, runs,
can-accept, queue paused) and of `mcprt_executions_running`, computed from the instances'
own `CapacityDescriptor`s (no Redis round trip). Each process exports the instances it
hosts, so `sum(...)` over all targets is the fleet. The instance's owning tenant is a label
only when tenant labels are enabled. Must not read or write Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runtime_core.instances import CapacityDescriptor
from runtime_core.observability._gauges import CachedGauges, GaugeFamily, GaugeValues
from runtime_core.observability._settings import ObservabilitySettings

CapacitySource = Callable[[], Iterable[CapacityDescriptor]]

_INSTANCE = "runtime_instance_id"


def capacity_gauges(source: CapacitySource, settings: ObservabilitySettings) -> CachedGauges:
    """Gauges over `source()` (e.g. a pool's instances' `capacity()`), cached `metrics_cache_s`."""
    tenant = ("tenant",) if settings.metrics_tenant_labels else ()

    def labelled(state_values: Callable[[CapacityDescriptor], dict[str, float]]) -> GaugeValues:
        values: dict[tuple[str, ...], float] = {}
        for capacity in source():
            owner = (capacity.tenant_id or "",) if tenant else ()
            for state, value in state_values(capacity).items():
                values[(capacity.runtime_instance_id, *owner, *((state,) if state else ()))] = value
        return values

    def family(
        name: str, doc: str, states: bool, read: Callable[[CapacityDescriptor], dict[str, float]]
    ) -> GaugeFamily:
        async def reader() -> GaugeValues:
            return labelled(read)

        labels = (_INSTANCE, *tenant, *(("state",) if states else ()))
        return GaugeFamily(name, doc, labels, reader)

    async def running_total() -> GaugeValues:
        return {(): float(sum(capacity.running for capacity in source()))}

    families = [
        family(
            "mcprt_instance_workers",
            "Workers of a runtime instance hosted here, by state (active, available).",
            True,
            lambda c: {"active": c.active_workers, "available": c.available_workers},
        ),
        family(
            "mcprt_instance_run_slots",
            "Run slots of a runtime instance hosted here, by state (used, available).",
            True,
            lambda c: {
                "used": c.max_concurrent_runs - c.available_run_slots,
                "available": c.available_run_slots,
            },
        ),
        family(
            "mcprt_instance_runs",
            "Local runs of a runtime instance hosted here, by state (queued, running).",
            True,
            lambda c: {"queued": c.queued, "running": c.running},
        ),
        family(
            "mcprt_instance_can_accept_run",
            "1 when the instance would accept a run now (queue, slot and worker free, not paused).",
            False,
            lambda c: {"": float(c.can_accept_run)},
        ),
        family(
            "mcprt_instance_queue_paused",
            "1 while the instance's local queue is paused.",
            False,
            lambda c: {"": float(c.queue_paused)},
        ),
        GaugeFamily(
            "mcprt_executions_running",
            "Runs executing (or parked) on the runtime instances hosted by this process.",
            (),
            running_total,
        ),
    ]
    return CachedGauges(families, ttl_s=settings.metrics_cache_s)
