"""Builders shared by the control-plane tests: engine, control plane, snapshots, gate step."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime_core.control import ExecutionControlService, attach_execution_control
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, TenantsFile
from runtime_core.dag import DagEngine, DagStore, EngineSettings
from runtime_core.events import RunEventObserver, RunEventPublisher
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    InstanceDependencies,
    IsolationMode,
    RuntimeInstance,
    RuntimeInstanceSettings,
    TenantSettingsCatalog,
    local_instance_id,
)
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.steps import StepInvocation, default_executor_registry
from runtime_core.webhooks import WebhookSettings

EXAMPLE_TENANTS = Path(__file__).resolve().parents[2] / "examples" / "config" / "tenants.json"

TENANT_A = ExecutionContextSnapshot(user_id="alice", tenant_id="tenant-a", context_key="test-a")
TENANT_B = ExecutionContextSnapshot(user_id="bob", tenant_id="tenant-b", context_key="test-b")
DEFAULT_TENANT = ExecutionContextSnapshot(
    user_id="carol", tenant_id="test-tenant", context_key="test-default"
)
OTHER_SHARED_TENANT = ExecutionContextSnapshot(
    user_id="dave", tenant_id="other-tenant", context_key="test-other"
)
OPERATOR = ExecutionContextSnapshot(user_id="operator", tenant_id="ops-tenant", context_key="ambient")

ONE_STEP = parse_pipeline({"name": "one", "steps": [{"name": "only", "stepKey": "test.noop"}]})
GATED = parse_pipeline(
    {
        "name": "gated",
        "steps": [
            {"name": "hold", "stepKey": "test.gate"},
            {"name": "after", "stepKey": "test.noop", "dependsOn": ["hold"]},
        ],
    }
)


def chain_and_fan_pipeline(steps: int, name: str = "hundred") -> PipelineDefinition:
    """`start` -> (steps - 2) parallel branches -> `join`: `steps` test.noop steps."""
    width = steps - 2
    body: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.noop"}]
    body += [{"name": f"s{i:03d}", "stepKey": "test.noop", "dependsOn": ["start"]} for i in range(width)]
    body.append({"name": "join", "stepKey": "test.noop", "dependsOn": [f"s{i:03d}" for i in range(width)]})
    return parse_pipeline({"name": name, "steps": body})


class GateExecutor:
    """`test.gate`: blocks until `release()`; counts concurrent invocations per execution."""

    step_key = "test.gate"

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.started = 0
        self.active: dict[str, int] = {}
        self.max_active: dict[str, int] = {}

    def release(self) -> None:
        self.released.set()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        key = invocation.execution_id
        self.started += 1
        self.active[key] = self.active.get(key, 0) + 1
        self.max_active[key] = max(self.max_active.get(key, 0), self.active[key])
        try:
            await self.released.wait()
        finally:
            self.active[key] -= 1
        return {"data": {"step": invocation.step_name}}


def make_engine(hot_state: HotState, *extra_executors: object) -> tuple[DagEngine, ExecutionControlService]:
    registry = default_executor_registry()
    for executor in extra_executors:
        registry.register(executor)  # type: ignore[arg-type]
    engine = DagEngine(DagStore(hot_state), registry, RetryEngine(), settings=EngineSettings(lease_ms=30_000))
    control = ExecutionControlService(hot_state)
    attach_execution_control(engine, control)
    return engine, control


def control_plane(
    hot_state: HotState,
    *extra_executors: object,
    tenants: TenantSettingsCatalog | None = None,
    **settings: Any,
) -> ControlPlane:
    """A control plane with no instances, no background pump, fast heartbeats (start nothing)."""
    engine, control = make_engine(hot_state, *extra_executors)
    values: dict[str, Any] = {
        "host": "testhost",
        "local_instances": 0,
        "background_pump": False,
        "heartbeat_interval_ms": 200,
        "pump_idle_interval_ms": 20,
        "scale_out_watch_interval_ms": 20,
        **settings,
    }
    catalog = tenants or TenantsFile.read(EXAMPLE_TENANTS).catalog
    return ControlPlane.build(hot_state, engine, control, ControlPlaneSettings(**values), tenants=catalog)


def evented_control_plane(
    hot_state: HotState, *extra_executors: object, host: str, webhooks: WebhookSettings | None = None
) -> tuple[ControlPlane, RunEventPublisher]:
    """A control plane (no instances, no pump) whose engine, journal and instances publish run events."""
    engine, control = make_engine(hot_state, *extra_executors)
    publisher = RunEventPublisher(hot_state)
    engine.observer = RunEventObserver(publisher, engine.store)
    plane = ControlPlane.build(
        hot_state,
        engine,
        control,
        ControlPlaneSettings(host=host, local_instances=0, background_pump=False),
        tenants=TenantsFile.read(EXAMPLE_TENANTS).catalog,
        events=publisher,
        webhooks=webhooks,
    )
    return plane, publisher


async def start_instance(
    plane: ControlPlane, prefix: str = "runtime-instance", n: int = 1, **settings: Any
) -> RuntimeInstance:
    values: dict[str, Any] = {
        "runtime_instance_id": local_instance_id("testhost", prefix, n),
        "runtime_instance_id_prefix": prefix,
        "host": "testhost",
        "heartbeat_interval_ms": 200,
        "isolation_mode": IsolationMode.SHARED,
        **settings,
    }
    return await plane.parts.pool.start_instance(RuntimeInstanceSettings(**values))


def standalone_instance(plane: ControlPlane, **settings: Any) -> RuntimeInstance:
    """An instance outside the pool (queue-control tests drive it directly)."""
    values: dict[str, Any] = {
        "runtime_instance_id": local_instance_id("testhost", "solo", 1),
        "heartbeat_interval_ms": 200,
    }
    deps: InstanceDependencies = plane.parts.pool.deps
    return RuntimeInstance(RuntimeInstanceSettings(**{**values, **settings}), deps)
