"""Builders shared by the recovery tests: a control plane with audit, tenant-owned instances,
a simulated process crash, and the two ways work sits on an instance when it dies."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from runtime_core.audit import AuditServices, build_audit_services
from runtime_core.control import ExecutionControlService, attach_execution_control
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings
from runtime_core.dag import DagEngine, DagStore, EngineSettings, ExecutionView
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    InstanceHealth,
    IsolationMode,
    LocalRunStatus,
    RunIndexRecord,
    RuntimeInstance,
    TenantSettingsCatalog,
)
from runtime_core.pipeline import parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.providers import DispatchRequest
from runtime_core.queueing import PumpIdentity, SubmitMode
from runtime_core.steps import default_executor_registry
from runtime_core.storage import SqliteDurableStore
from tests.helpers import CountingExecutor, wait_until
from tests.integration.control_plane_support import ONE_STEP, GateExecutor, start_instance

TENANT_C = ExecutionContextSnapshot(user_id="cyril", tenant_id="tenant-c", context_key="test-c")

# Every tenant owns its capacity (Dedicated, no shared fallback). Two instances at most: the
# crashed one still counts in the local pool, so scale-out creates exactly one replacement.
TENANTS = TenantSettingsCatalog.from_mapping(
    {
        tenant: {
            "isolationMode": "Dedicated",
            "allowSharedFallback": False,
            "preferDedicatedCapacity": True,
            "maxRuntimeInstances": 2,
            "runtimeInstanceIdPrefix": f"{tenant}-runtime",
            "workerCountPerInstance": 3,
            "maxConcurrentRunsPerInstance": 3,
            "maxLocalWorkersPerExecution": 1,
        }
        for tenant in ("tenant-a", "tenant-b", "tenant-c")
    }
)

# a -> f (fails once, retried) -> hold (blocks until released: the crash threshold) -> b1, b2 -> z
RESUMABLE = parse_pipeline(
    {
        "name": "resumable",
        "steps": [
            {"name": "a", "stepKey": "test.count"},
            {
                "name": "f",
                "stepKey": "test.flaky",
                "dependsOn": ["a"],
                "config": {"failTimes": 1, "retry": {"maxRetries": 2, "baseDelayMs": 1}},
            },
            {"name": "hold", "stepKey": "test.gate", "dependsOn": ["f"]},
            {"name": "b1", "stepKey": "test.count", "dependsOn": ["hold"]},
            {"name": "b2", "stepKey": "test.count", "dependsOn": ["hold"]},
            {"name": "z", "stepKey": "test.count", "dependsOn": ["b1", "b2"]},
        ],
    }
)

HEALTH_WINDOW_MS = 300
HEARTBEAT_MS = 50


def make_engine(
    hot_state: HotState, counter: CountingExecutor, gate: GateExecutor
) -> tuple[DagEngine, ExecutionControlService]:
    registry = default_executor_registry()
    registry.register(counter)  # type: ignore[arg-type]
    registry.register(gate)  # type: ignore[arg-type]
    engine = DagEngine(DagStore(hot_state), registry, RetryEngine(), settings=EngineSettings(lease_ms=30_000))
    control = ExecutionControlService(hot_state)
    attach_execution_control(engine, control)
    return engine, control


@dataclass
class Rig:
    plane: ControlPlane
    audit: AuditServices
    counter: CountingExecutor = field(default_factory=CountingExecutor)
    gate: GateExecutor = field(default_factory=GateExecutor)


def recovery_rig(hot_state: HotState, durable: SqliteDurableStore, **settings: Any) -> Rig:
    """Control plane + audit (forensics, ledger, snapshots) with a short health window."""
    counter, gate = CountingExecutor(), GateExecutor()
    engine, control = make_engine(hot_state, counter, gate)
    audit = build_audit_services(durable, engine.store, instance_id="rt_recovery_test")
    engine.observer, engine.results = audit.observer, audit.codec
    values: dict[str, Any] = {
        "host": "testhost",
        "local_instances": 0,
        "background_pump": False,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "health_window_ms": HEALTH_WINDOW_MS,
        "pump_idle_interval_ms": 20,
        "scale_out_watch_interval_ms": 20,
        **settings,
    }
    plane = ControlPlane.build(
        hot_state, engine, control, ControlPlaneSettings(**values), tenants=TENANTS, audit=audit
    )
    return Rig(plane, audit, counter, gate)


async def tenant_instance(rig: Rig, snapshot: ExecutionContextSnapshot, n: int = 1) -> RuntimeInstance:
    """Instance `n` owned by the snapshot's tenant (3 workers, 1 per execution, 3 runs)."""
    return await start_instance(
        rig.plane,
        prefix=f"{snapshot.tenant_id}-runtime",
        n=n,
        isolation_mode=IsolationMode.DEDICATED,
        tenant_id=snapshot.tenant_id,
        worker_count=3,
        max_local_workers_per_execution=1,
        max_concurrent_runs=3,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )


async def crash(instance: RuntimeInstance) -> None:
    """What SIGKILL leaves: no heartbeat, no workers; registry, index and DAG state stay."""
    await instance.stop(unregister=False)


async def mark_unsafe(rig: Rig, instance: RuntimeInstance) -> None:
    """Run health passes until the crashed instance's heartbeat lapses and it is Unsafe."""
    parts = rig.plane.parts
    registry_key = parts.registry.keys(instance.runtime_instance_id).registry

    async def marked() -> bool:
        await parts.health.reconcile_once()
        return await parts.hot_state.redis.hget(registry_key, "health") == InstanceHealth.UNSAFE

    await wait_until(marked, timeout=5)


@dataclass(frozen=True)
class InFlight:
    shared_run_id: str
    local_run_id: str
    execution_id: str


async def start_in_flight(rig: Rig, snapshot: ExecutionContextSnapshot) -> InFlight:
    """Dispatch RESUMABLE and wait until its `hold` step runs (a, f Completed; hold Running)."""
    submitted = await rig.plane.submit(RESUMABLE, {}, SubmitMode.QUEUE_FIRST, snapshot)
    await rig.plane.drain(10, snapshot)
    index = rig.plane.parts.index

    async def holding() -> bool:
        record = await index.get_by_shared(submitted.shared_run_id)
        return record is not None and rig.gate.active.get(record.execution_id or "", 0) == 1

    await wait_until(holding, timeout=10)
    record = await index.get_by_shared(submitted.shared_run_id)
    assert record is not None and record.execution_id is not None
    return InFlight(submitted.shared_run_id, record.local_run_id, record.execution_id)


async def queue_locally(rig: Rig, instance: RuntimeInstance, snapshot: ExecutionContextSnapshot) -> str:
    """A shared run dispatched into the instance's (paused) local queue: LocalQueued, no ExecutionId.

    A paused instance is not offered by admission, so this claims the item and dispatches it the
    way the dispatcher does after admission (provider dispatch, then mark Dispatched).
    """
    parts = rig.plane.parts
    submitted = await rig.plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, snapshot)
    claim = await parts.queue.claim_next(
        PumpIdentity(pump_runtime_instance_id="test", pump_worker_id=secrets.token_hex(3))
    )
    assert claim is not None and claim.shared_run_id == submitted.shared_run_id
    run = await parts.runs.get(submitted.shared_run_id)
    assert run is not None
    response = await parts.providers.by_name("local").dispatch(
        DispatchRequest(
            runtime_instance_id=instance.runtime_instance_id,
            shared_run_id=run.shared_run_id,
            pipeline=run.pipeline,
            input=run.input,
            snapshot=run.snapshot,
        )
    )
    marked = await parts.queue.mark_dispatched(
        run.shared_run_id,
        claim.token,
        {"local_run_id": response.local_run_id, "assigned_runtime_instance_id": instance.runtime_instance_id},
    )
    assert marked.applied
    return run.shared_run_id


async def latest_record(rig: Rig, shared_run_id: str) -> RunIndexRecord:
    record = await rig.plane.parts.index.get_by_shared(shared_run_id)
    assert record is not None
    return record


async def wait_completed(rig: Rig, shared_run_ids: list[str], *, timeout: float = 15) -> None:
    """Pump until every run's latest local run is Completed."""

    async def done() -> bool:
        await rig.plane.drain(50, TENANT_C)
        records = [await rig.plane.parts.index.get_by_shared(s) for s in shared_run_ids]
        return all(r is not None and r.status is LocalRunStatus.COMPLETED for r in records)

    await wait_until(done, timeout=timeout, interval=0.02)


async def live_view(rig: Rig, execution_id: str) -> ExecutionView:
    view = await rig.plane.parts.dag_store.read_execution(execution_id)
    assert view is not None
    return view
