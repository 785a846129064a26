"""Capacity gauges of the runtime instances one process hosts, read from memory at scrape time.

Owns the names and labels of the per-instance capacity gauges (workers, run slots, runs by
state, can-accept, queue paused) and of the running / waiting-for-input / paused execution
totals (a parked run is not counted as running), computed from the instances' own
`CapacityDescriptor`s (no Redis round trip). Each process exports the instances it
hosts, so `sum(...)` over all targets is the fleet. The instance's owning tenant is a label
only when tenant labels are enabled. Must not read or write Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runtime_core.instances import CapacityDescriptor
from runtime_core.observability._gauges import CachedGauges, GaugeFamily, GaugeReader, GaugeValues
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

    def total(count: Callable[[CapacityDescriptor], int]) -> GaugeReader:
        async def reader() -> GaugeValues:
            return {(): float(sum(count(capacity) for capacity in source()))}

        return reader

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
            lambda c: {
                "queued": c.queued,
                "running": _advancing(c),
                "waiting_for_input": c.waiting_for_input,
                "paused": c.paused_runs,
            },
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
            "Runs executing on the instances hosted by this process (neither waiting for input nor paused).",
            (),
            total(_advancing),
        ),
        GaugeFamily(
            "mcprt_executions_waiting_for_input",
            "Runs parked until a human answers (input.submit), on the instances hosted by this process.",
            (),
            total(lambda c: c.waiting_for_input),
        ),
        GaugeFamily(
            "mcprt_executions_paused",
            "Paused runs (holding a run slot, no worker), on the instances hosted by this process.",
            (),
            total(lambda c: c.paused_runs),
        ),
    ]
    return CachedGauges(families, ttl_s=settings.metrics_cache_s)


def _advancing(capacity: CapacityDescriptor) -> int:
    """Running runs that are not parked (waiting for input or paused)."""
    return max(0, capacity.running - capacity.waiting_for_input - capacity.paused_runs)
