"""Builders for the HTTP / gRPC provider tests: a control plane with runtime-instance process hosting.

Each test gets a control plane on its own Redis key prefix with a host manager whose
children use the same Redis, prefix and a per-test data directory; `plane.stop()` stops
every child (SIGTERM, SIGKILL after the grace period) so no process outlives its test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, TenantsFile
from runtime_core.hot_state import EmbeddedRedis, HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    HostedProcess,
    HostLaunch,
    HostManagerSettings,
    HostTransport,
    IsolationMode,
    LocalRunStatus,
    RuntimeHostManager,
)
from runtime_core.pipeline import parse_pipeline
from runtime_core.providers import RemoteRuntimeProvider
from tests.helpers import wait_until
from tests.integration.control_plane_support import EXAMPLE_TENANTS, make_engine

APPROVAL = parse_pipeline({"name": "approval", "steps": [{"name": "approve", "stepKey": "human.approval"}]})


@asynccontextmanager
async def hosted_control_plane(
    hot_state: HotState,
    redis_server: EmbeddedRedis,
    data_dir: Path,
    *,
    executors: Sequence[object] = (),
    providers_file: Path | None = None,
    **settings: Any,
) -> AsyncIterator[ControlPlane]:
    """A started control plane (discovery published, no in-process instances, no recovery);
    `executors` replace built-ins in its engine, children read `providers_file`."""
    engine, control = make_engine(hot_state, *executors)
    values: dict[str, Any] = {
        "host": "testhost",
        "local_instances": 0,
        "background_pump": False,
        "heartbeat_interval_ms": 200,
        "instance_stale_after_ms": 60_000,
        "pump_idle_interval_ms": 20,
        "scale_out_watch_interval_ms": 20,
        "recovery_enabled": False,
        **settings,
    }
    hosting = HostManagerSettings(
        redis_url=redis_server.url,
        redis_prefix=hot_state.prefix,
        data_dir=data_dir,
        host_name="testhost",
        tenants_file=EXAMPLE_TENANTS,
        providers_file=providers_file,
        heartbeat_interval_ms=200,
        discovery_timeout_s=1,
        stop_grace_s=10,
    )
    plane = ControlPlane.build(
        hot_state,
        engine,
        control,
        ControlPlaneSettings(**values),
        tenants=TenantsFile.read(EXAMPLE_TENANTS).catalog,
        hosting=hosting,
    )
    await plane.start()
    try:
        yield plane
    finally:
        await plane.stop()


def hosts(plane: ControlPlane) -> RuntimeHostManager:
    assert plane.parts.hosts is not None
    return plane.parts.hosts


def remote_provider(plane: ControlPlane, transport: HostTransport) -> RemoteRuntimeProvider:
    provider = plane.parts.providers.by_name(transport.value)
    assert isinstance(provider, RemoteRuntimeProvider)
    return provider


async def start_shared_host(
    plane: ControlPlane, transport: HostTransport, *, pool_size: int = 2, **launch: Any
) -> HostedProcess:
    """A Shared-isolation process for the default tenant, children named `runtime-<transport>-<n>`."""
    values: dict[str, Any] = {
        "transport": transport,
        "tenant_id": "test-tenant",
        "isolation_mode": IsolationMode.SHARED,
        "instance_prefix": f"runtime-{transport.value}",
        "pool_size": pool_size,
        "worker_count": 4,
        "max_concurrent_runs": 4,
        **launch,
    }
    return await hosts(plane).start_host(HostLaunch(**values))


async def wait_local_status(
    plane: ControlPlane,
    any_id: str,
    snapshot: ExecutionContextSnapshot,
    status: LocalRunStatus,
    *,
    timeout: float = 20,
) -> None:
    async def reached() -> bool:
        view = await plane.run_status(any_id, snapshot)
        return view.local_status == status.value

    await wait_until(reached, timeout=timeout, interval=0.05)
