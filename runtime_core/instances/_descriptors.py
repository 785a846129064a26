"""The registry and capacity descriptors one runtime instance publishes, from its state now.

Owns building `InstanceDescriptor` (identity, incarnation, status, tenant ownership, provider
metadata) and `CapacityDescriptor` (workers, runs, slots, `can_accept_run`) from the
instance's settings and an `InstanceLoad` snapshot of its counters. Must not read or write
Redis, nor hold state.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.instances._models import (
    PROVIDER_NAME_KEY,
    TRANSPORT_ENDPOINT_KEY,
    TRANSPORT_NAME_KEY,
    CapacityDescriptor,
    InstanceDescriptor,
    RuntimeInstanceSettings,
)


@dataclass(frozen=True)
class InstanceLoad:
    """What an instance holds right now (and whether it may take more at all)."""

    incarnation: str
    queued: int
    running: int
    active_workers: int
    waiting_for_input: int  # running runs parked: they hold a run slot but no worker
    paused_runs: int
    paused: bool
    stopping: bool
    fenced: bool
    # Execution assistance: the workers it offers (0: off), and whom it assists now.
    assistance_workers: int = 0
    assisting_executions: int = 0
    assisting_workers: int = 0


def _endpoint(s: RuntimeInstanceSettings) -> str:
    return s.transport_endpoint or f"inproc://{s.runtime_instance_id}"


def instance_descriptor(s: RuntimeInstanceSettings, load: InstanceLoad) -> InstanceDescriptor:
    return InstanceDescriptor(
        runtime_instance_id=s.runtime_instance_id,
        incarnation=load.incarnation,
        role=s.role,
        status="Stopping" if load.stopping else ("Paused" if load.paused else "Ready"),
        host=s.host,
        isolation_mode=s.isolation_mode,
        tenant_id=s.tenant_id,
        tenant_group_id=s.tenant_group_id,
        prefer_dedicated_capacity=s.prefer_dedicated_capacity,
        allow_shared_fallback=s.allow_shared_fallback,
        runtime_instance_id_prefix=s.runtime_instance_id_prefix,
        metadata={
            **s.metadata,
            PROVIDER_NAME_KEY: s.provider_name,
            TRANSPORT_NAME_KEY: s.transport_name,
            TRANSPORT_ENDPOINT_KEY: _endpoint(s),
        },
    )


def accepts_runs(s: RuntimeInstanceSettings, *, queued: int, running: int, closed: bool) -> bool:
    """A capacity descriptor's `can_accept_run`, without building one: not `closed` (paused,
    stopping or fenced), room in the queue and a run slot."""
    return not closed and queued < s.local_queue_capacity and s.max_concurrent_runs - queued - running > 0


def instance_capacity(s: RuntimeInstanceSettings, load: InstanceLoad) -> CapacityDescriptor:
    """`can_accept_run`: not paused, stopping or fenced, room in the queue and a run slot.

    Busy workers do not refuse a run: workers are shared between the running runs step by
    step (a worker holds one only while it runs steps), so a run admitted while all of them
    are busy starts at once and its steps run as soon as a worker is free.
    `available_workers` is the figure at publication time.
    """
    available_workers = s.worker_count - load.active_workers
    slots = max(0, s.max_concurrent_runs - load.queued - load.running)
    can_accept = accepts_runs(
        s, queued=load.queued, running=load.running, closed=load.paused or load.stopping or load.fenced
    )
    return CapacityDescriptor(
        runtime_instance_id=s.runtime_instance_id,
        incarnation=load.incarnation,
        worker_count=s.worker_count,
        active_workers=load.active_workers,
        available_workers=available_workers,
        max_local_workers_per_execution=s.max_local_workers_per_execution,
        queued=load.queued,
        running=load.running,
        waiting_for_input=load.waiting_for_input,
        paused_runs=load.paused_runs,
        active_runs=load.queued + load.running,
        queue_capacity=s.local_queue_capacity,
        max_concurrent_runs=s.max_concurrent_runs,
        available_run_slots=slots,
        queue_paused=load.paused,
        can_accept_run=can_accept,
        tenant_id=s.tenant_id,
        tenant_group_id=s.tenant_group_id,
        isolation_mode=s.isolation_mode,
        prefer_dedicated_capacity=s.prefer_dedicated_capacity,
        allow_shared_fallback=s.allow_shared_fallback,
        runtime_instance_id_prefix=s.runtime_instance_id_prefix,
        provider_name=s.provider_name,
        transport_name=s.transport_name,
        provider_endpoint=_endpoint(s),
        assistance_workers=0 if load.paused or load.stopping or load.fenced else load.assistance_workers,
        assisting_executions=load.assisting_executions,
        assisting_workers=load.assisting_workers,
    )
