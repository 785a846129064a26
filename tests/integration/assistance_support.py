"""Scaffolding of the execution assistance tests over real runtime-instance processes.

One control plane in the test process (real Redis, SQLite under a temporary data directory its
children share, no local instances, no background pump) whose host manager starts HTTP
runtime-instance processes loading the `assist.attempt` step plug-in. A wide fan-out of
`assist.attempt` steps records every attempt in a file and holds until its gate file exists,
so a test can open the gate once an assistant joined (or kill it) at a point it chose.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_core.assistance import AssistantRecord, assistant_records
from runtime_core.audit import AuditServices, build_audit_services
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, TenantsFile
from runtime_core.dag import DagEngine, DagStore, execution_fingerprint
from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    HostedProcess,
    HostLaunch,
    HostManagerSettings,
    HostTransport,
    IsolationMode,
    RunIndexRecord,
    RuntimeHostManager,
)
from runtime_core.lifecycle import HotStateRetention, LifecycleSettings
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.plugins import StepPluginSettings
from runtime_core.policy import RetryEngine
from runtime_core.queueing import SubmitMode
from runtime_core.steps import ExecutorRegistry, default_executor_registry
from runtime_core.storage import SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.assistance_steps import STEP_REFERENCE, attempt
from tests.integration.crash_isolation_scenario import plane_engine, write_tenants_file

TENANT_A = ExecutionContextSnapshot(user_id="alice", tenant_id="tenant-a", context_key="assist-a")
# Tenant A owns dedicated capacity and may fall back to shared capacity; tenant B owns its own.
TENANT_SETTINGS = {
    "tenant-a": {
        "isolationMode": "Dedicated",
        "allowSharedFallback": True,
        "runtimeInstanceIdPrefix": "tenant-a-runtime",
        "maxRuntimeInstances": 4,
    },
    "tenant-b": {
        "isolationMode": "Dedicated",
        "allowSharedFallback": False,
        "runtimeInstanceIdPrefix": "tenant-b-runtime",
        "maxRuntimeInstances": 4,
    },
}
HEARTBEAT_MS = 1_000  # assistance leases last three heartbeats: 3 s, ample on a loaded machine
WORKERS = 4
MAX_LOCAL_WORKERS_PER_EXECUTION = 2  # each instance's effective worker count for one execution
TIMEOUT_S = 60


def wide_fan_out(width: int) -> PipelineDefinition:
    steps: list[dict[str, Any]] = [{"name": "start", "stepKey": "assist.attempt"}]
    steps += [
        {"name": f"b{i:04d}", "stepKey": "assist.attempt", "dependsOn": ["start"], "config": {"gated": True}}
        for i in range(width)
    ]
    steps.append(
        {"name": "join", "stepKey": "assist.attempt", "dependsOn": [f"b{i:04d}" for i in range(width)]}
    )
    return parse_pipeline({"name": f"assisted-fan-{width}", "steps": steps})


def executors() -> ExecutorRegistry:
    registry = default_executor_registry()
    registry.register(attempt)
    return registry


@dataclass
class Rig:
    plane: ControlPlane
    audit: AuditServices
    hot_state: HotState
    redis_url: str
    data_dir: Path

    @property
    def hosts(self) -> RuntimeHostManager:
        assert self.plane.parts.hosts is not None
        return self.plane.parts.hosts

    async def start_process(
        self, tenant_id: str, isolation_mode: IsolationMode, prefix: str
    ) -> HostedProcess:
        return await self.hosts.start_host(
            HostLaunch(
                transport=HostTransport.HTTP,
                tenant_id=tenant_id,
                isolation_mode=isolation_mode,
                instance_prefix=prefix,
                worker_count=WORKERS,
                max_local_workers_per_execution=MAX_LOCAL_WORKERS_PER_EXECUTION,
            )
        )

    async def submit(self, pipeline: PipelineDefinition, state: dict[str, Any]) -> RunIndexRecord:
        """Dispatch a run of tenant A at once; its local run once its execution exists."""
        submitted = await self.plane.submit(pipeline, state, SubmitMode.DIRECT_DISPATCH, TENANT_A)

        async def started() -> bool:
            record = await self.plane.parts.index.get_by_shared(submitted.shared_run_id)
            return record is not None and record.execution_id is not None

        await wait_until(started, timeout=TIMEOUT_S, interval=0.02)
        record = await self.plane.parts.index.get_by_shared(submitted.shared_run_id)
        assert record is not None
        return record

    async def assistants(self, execution_id: str) -> list[AssistantRecord]:
        meta = await self.plane.parts.dag_store.load_meta(execution_id)
        return assistant_records(meta.attributes) if meta is not None else []

    async def wait_assisted_by(self, execution_id: str, runtime_instance_id: str) -> None:
        async def joined() -> bool:
            return any(
                r.runtime_instance_id == runtime_instance_id for r in await self.assistants(execution_id)
            )

        await wait_until(joined, timeout=TIMEOUT_S, interval=0.02)

    async def wait_completed(self, shared_run_id: str) -> RunIndexRecord:
        async def ended() -> bool:
            record = await self.plane.parts.index.get_by_shared(shared_run_id)
            return record is not None and record.status.is_terminal

        await wait_until(ended, timeout=TIMEOUT_S, interval=0.05)
        record = await self.plane.parts.index.get_by_shared(shared_run_id)
        assert record is not None
        return record

    async def retire_finished(self) -> None:
        """Archive the finished runs whose evidence is durable: their hot state leaves Redis."""
        sweeper = self.plane.parts.lifecycle.sweeper
        assert sweeper is not None
        await sweeper.sweep_once()

    async def reference_fingerprint(
        self, pipeline: PipelineDefinition, state: dict[str, Any], execution_id: str
    ) -> str:
        """The same pipeline + input + ExecutionId run unassisted, in this process, elsewhere."""
        reference = connect_hot_state(self.redis_url, prefix=f"ref{secrets.token_hex(4)}:")
        try:
            engine = DagEngine(DagStore(reference), executors(), RetryEngine())
            await engine.create_execution(pipeline, state, TENANT_A, execution_id=execution_id)
            assert await engine.run(execution_id, workers=MAX_LOCAL_WORKERS_PER_EXECUTION) == "Completed"
            view = await engine.store.read_execution(execution_id)
            assert view is not None
            return execution_fingerprint(view)
        finally:
            await reference.close()


@asynccontextmanager
async def assistance_rig(redis_server: EmbeddedRedis, data_dir: Path) -> AsyncIterator[Rig]:
    hot_state = connect_hot_state(redis_server.url, prefix=f"as{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(data_dir / "runtime.db")
    engine, control = plane_engine(hot_state, executors=executors())
    audit = build_audit_services(durable, engine.store, instance_id="control-plane")
    engine.observer, engine.results = audit.observer, audit.codec
    tenants_file = write_tenants_file(data_dir, TENANT_SETTINGS)
    settings = ControlPlaneSettings(
        host="testhost",
        local_instances=0,
        background_pump=False,
        heartbeat_interval_ms=HEARTBEAT_MS,
        scale_out_enabled=False,
        recovery_enabled=False,
        # Finished runs leave Redis only when a test sweeps them (`retire_finished`).
        lifecycle=LifecycleSettings(hot=HotStateRetention(enabled=False, grace_ms=0)),
    )
    hosting = HostManagerSettings(
        redis_url=redis_server.url,
        redis_prefix=hot_state.prefix,
        data_dir=data_dir,
        host_name="testhost",
        tenants_file=tenants_file,
        step_plugins=StepPluginSettings(entry_points=False, references=(STEP_REFERENCE,)),
        heartbeat_interval_ms=HEARTBEAT_MS,
        discovery_timeout_s=5,
    )
    plane = ControlPlane.build(
        hot_state,
        engine,
        control,
        settings,
        tenants=TenantsFile.read(tenants_file).catalog,
        audit=audit,
        hosting=hosting,
    )
    try:
        await plane.start()
        yield Rig(plane, audit, hot_state, redis_server.url, data_dir)
    finally:
        await plane.stop()
        await audit.close()
        await durable.close()
        await hot_state.close()
