"""The runtime host manager: start, track and stop runtime-instance OS processes.

Owns launching `python -m runtime_core.hosting` children (one runtime-instance process
hosting a pool of K child runtime instances behind an HTTP or gRPC command endpoint on a
free loopback port, loading the same step plug-ins as this process; a gRPC one also gets a
free `/metrics` port; a child that exits because its port was taken meanwhile is started
again on another one), waiting with a timeout until every child instance is registered and
live, recording each process (pid, port, transport, instance ids) in memory and in Redis,
tenant-scoped process scale-out (instances counted by RuntimeInstanceIdPrefix against
MaxRuntimeInstances, like the local scaler) and stopping processes (SIGTERM, then SIGKILL
after a grace period). Must not dispatch runs, recover work or call the command endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import sys
import time
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field

from runtime_core.errors import RuntimeCoreError
from runtime_core.hot_state import find_free_port
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._models import InstanceHealth
from runtime_core.instances._registry import InstanceRegistry
from runtime_core.instances._scaler import ScaleOutOutcome, local_instance_id
from runtime_core.instances._tenants import IsolationMode, TenantRuntimeSettings
from runtime_core.plugins import StepPluginSettings

log = logging.getLogger("runtime_core.instances")

HOSTING_MODULE = "runtime_core.hosting"
_LOG_TAIL_BYTES = 2_000


class HostTransport(StrEnum):
    HTTP = "http"
    GRPC = "grpc"

    def endpoint(self, port: int) -> str:
        """`transport.endpoint` of a process listening on loopback `port`."""
        return f"http://127.0.0.1:{port}" if self is HostTransport.HTTP else f"127.0.0.1:{port}"


class HostStartError(RuntimeCoreError):
    """A runtime-instance process exited or did not register its instances in time."""

    code = "host_start_failed"


class _PortTaken(Exception):
    """The child exited because its port was bound by another process meanwhile."""

    def __init__(self, error: HostStartError) -> None:
        super().__init__(error.message)
        self.error = error


_PORT_ATTEMPTS = 3
PORT_TAKEN_EXIT_CODE = 75  # EX_TEMPFAIL
"""How a runtime-instance process says it could not listen: its port was taken meanwhile."""


class HostManagerSettings(BaseModel):
    """Where children find Redis and their data, and how long to wait for them."""

    redis_url: str
    redis_prefix: str
    data_dir: Path
    host_name: str = "localhost"
    tenants_file: Path | None = None
    step_plugins: StepPluginSettings = Field(default_factory=StepPluginSettings)
    providers_file: Path | None = None
    heartbeat_interval_ms: int = Field(default=2_000, ge=10)
    registration_timeout_s: float = Field(default=30.0, gt=0)
    discovery_timeout_s: float = Field(default=10.0, gt=0)
    stop_grace_s: float = Field(default=10.0, ge=0)
    python: str = Field(default_factory=lambda: sys.executable)


class HostLaunch(BaseModel):
    """What one runtime-instance process hosts: K child instances of one tenant scope."""

    transport: HostTransport
    tenant_id: str
    tenant_group_id: str | None = None
    isolation_mode: IsolationMode = IsolationMode.SHARED
    instance_prefix: str = "runtime-instance"
    pool_size: int = Field(default=1, ge=1)
    worker_count: int = Field(default=4, ge=1)
    max_local_workers_per_execution: int | None = Field(default=None, ge=1)
    max_concurrent_runs: int = Field(default=3, ge=1)
    local_queue_capacity: int = Field(default=100, ge=1)
    host_id: str | None = None

    @classmethod
    def for_tenant(
        cls, transport: HostTransport, tenant: TenantRuntimeSettings, snapshot: ExecutionContextSnapshot
    ) -> HostLaunch:
        """One instance sized and scoped by the tenant's settings (scale-out of one instance)."""
        return cls(
            transport=transport,
            tenant_id=snapshot.tenant_id,
            tenant_group_id=snapshot.tenant_group_id,
            isolation_mode=tenant.isolation_mode,
            instance_prefix=tenant.runtime_instance_id_prefix,
            worker_count=tenant.worker_count_per_instance,
            max_local_workers_per_execution=tenant.max_local_workers_per_execution,
            max_concurrent_runs=tenant.max_concurrent_runs_per_instance,
            local_queue_capacity=tenant.local_queue_capacity,
        )


class HostedProcess(BaseModel):
    """A started runtime-instance process, as recorded in memory and in Redis."""

    host_id: str
    pid: int
    port: int
    transport: HostTransport
    endpoint: str
    tenant_id: str
    instance_prefix: str
    runtime_instance_ids: list[str]
    log_path: str
    started_at_ms: int


def hosted_instance_ids(host_id: str, prefix: str, pool_size: int) -> list[str]:
    """The ids of a process's child instances: `rt_<host id>:<prefix>-<n>`, n = 1..K."""
    return [local_instance_id(host_id, prefix, n) for n in range(1, pool_size + 1)]


class RuntimeHostManager:
    def __init__(self, registry: InstanceRegistry, settings: HostManagerSettings) -> None:
        self.registry = registry
        self.settings = settings
        self.records_key = registry.hot_state.key("hosts", "processes")
        self._hosts: dict[str, tuple[HostedProcess, asyncio.subprocess.Process]] = {}
        self._numbers = itertools.count(1)
        self._scale_lock = asyncio.Lock()

    def hosts(self) -> list[HostedProcess]:
        return [hosted for hosted, _ in self._hosts.values()]

    async def recorded_hosts(self) -> list[HostedProcess]:
        """The processes recorded in Redis by this manager (or another sharing the prefix)."""
        raw = await self.registry.hot_state.redis.hvals(self.records_key)
        return sorted((HostedProcess.model_validate_json(r) for r in raw), key=lambda h: h.host_id)

    # Starting

    async def start_host(self, launch: HostLaunch) -> HostedProcess:
        """Start a process; return once all its child instances are registered and live.

        The port is picked free but only bound by the child, so another process may take it
        in between: a child that exits because its port was taken is started again on
        another port (a few times)."""
        host_id = launch.host_id or await self._new_host_id(launch.transport)
        attempt = 1
        while True:
            try:
                return await self._start_host_once(launch, host_id)
            except _PortTaken as taken:
                if attempt >= _PORT_ATTEMPTS:
                    raise taken.error from None
                log.warning(
                    "host.port_taken host_id=%s attempt=%d",
                    host_id,
                    attempt,
                    extra={"host_id": host_id, "attempt": attempt},
                )
                attempt += 1

    async def _start_host_once(self, launch: HostLaunch, host_id: str) -> HostedProcess:
        port = find_free_port()
        log_path = self.settings.data_dir / "hosts" / f"{host_id}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log_file:
            process = await asyncio.create_subprocess_exec(
                self.settings.python,
                "-m",
                HOSTING_MODULE,
                *self._arguments(launch, host_id, port),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
            )
        hosted = HostedProcess(
            host_id=host_id,
            pid=process.pid,
            port=port,
            transport=launch.transport,
            endpoint=launch.transport.endpoint(port),
            tenant_id=launch.tenant_id,
            instance_prefix=launch.instance_prefix,
            runtime_instance_ids=hosted_instance_ids(host_id, launch.instance_prefix, launch.pool_size),
            log_path=str(log_path),
            started_at_ms=await self.registry.hot_state.server_time_ms(),
        )
        self._hosts[host_id] = (hosted, process)
        await self.registry.hot_state.redis.hset(self.records_key, host_id, hosted.model_dump_json())
        try:
            await self._await_registration(hosted, process)
        except HostStartError as error:
            await self.kill_host(host_id)
            if process.returncode == PORT_TAKEN_EXIT_CODE:
                raise _PortTaken(error) from error
            raise
        except BaseException:
            await self.kill_host(host_id)
            raise
        return hosted

    async def _new_host_id(self, transport: HostTransport) -> str:
        """`<host name>-<transport>-<n>`, skipping ids still registered or recorded (e.g. after a crash)."""
        taken = {h.host_id for h in await self.recorded_hosts()}
        taken |= {e.descriptor.host for e in await self.registry.entries()}
        while True:
            host_id = f"{self.settings.host_name}-{transport}-{next(self._numbers)}"
            if host_id not in taken:
                return host_id

    def _arguments(self, launch: HostLaunch, host_id: str, port: int) -> list[str]:
        s = self.settings
        args = {
            "--transport": launch.transport.value,
            "--port": str(port),
            "--tenant": launch.tenant_id,
            "--isolation": launch.isolation_mode.value,
            "--instance-prefix": launch.instance_prefix,
            "--pool-size": str(launch.pool_size),
            "--workers": str(launch.worker_count),
            "--max-concurrent-runs": str(launch.max_concurrent_runs),
            "--local-queue-capacity": str(launch.local_queue_capacity),
            "--redis-url": s.redis_url,
            "--redis-prefix": s.redis_prefix,
            "--data-dir": str(s.data_dir),
            "--host-id": host_id,
            "--heartbeat-ms": str(s.heartbeat_interval_ms),
            "--discovery-timeout": str(s.discovery_timeout_s),
            "--parent-pid": str(os.getpid()),
        }
        if launch.tenant_group_id:
            args["--tenant-group"] = launch.tenant_group_id
        if launch.max_local_workers_per_execution:
            args["--max-local-workers-per-execution"] = str(launch.max_local_workers_per_execution)
        if s.tenants_file:
            args["--tenants-file"] = str(s.tenants_file)
        if s.providers_file:
            args["--providers-file"] = str(s.providers_file)
        if s.step_plugins.references:
            args["--steps"] = ",".join(s.step_plugins.references)
        if launch.transport is HostTransport.GRPC:  # an HTTP process serves /metrics on its port
            args["--metrics-port"] = str(find_free_port())
        flags = [] if s.step_plugins.entry_points else ["--no-step-entry-points"]
        return [*(part for pair in args.items() for part in pair), *flags]

    async def _await_registration(self, hosted: HostedProcess, process: asyncio.subprocess.Process) -> None:
        deadline = time.monotonic() + self.settings.registration_timeout_s
        expected = set(hosted.runtime_instance_ids)
        exited = asyncio.ensure_future(process.wait())
        try:
            while not exited.done():
                live = {e.runtime_instance_id for e in await self.registry.entries() if e.live}
                if expected <= live:
                    return
                if time.monotonic() >= deadline:
                    raise HostStartError(
                        f"Runtime-instance process '{hosted.host_id}' did not register "
                        f"{sorted(expected - live)} within {self.settings.registration_timeout_s:g}s.",
                        hint=_log_tail(hosted.log_path),
                    )
                await asyncio.wait({exited}, timeout=0.05)  # poll the registry, wake early on exit
        finally:
            exited.cancel()
        raise HostStartError(
            f"Runtime-instance process '{hosted.host_id}' exited with code {process.returncode} "
            "before registering its instances.",
            hint=_log_tail(hosted.log_path),
        )

    # Scale-out

    async def scale_out(
        self, transport: HostTransport, tenant: TenantRuntimeSettings, snapshot: ExecutionContextSnapshot
    ) -> ScaleOutOutcome:
        """Start one process with one child instance in the tenant's scope, within its limit.

        Only Healthy instances count against the limit: an Unsafe one (its process died) is
        the capacity this scale-out replaces while recovery takes over its work.
        """
        async with self._scale_lock:
            prefix = tenant.runtime_instance_id_prefix
            existing = [
                e
                for e in await self.registry.entries()
                if e.descriptor.runtime_instance_id_prefix == prefix and e.health is InstanceHealth.HEALTHY
            ]
            if len(existing) >= tenant.max_runtime_instances:
                return ScaleOutOutcome(
                    fulfilled=False,
                    reason=f"'{prefix}' already has {len(existing)} of "
                    f"{tenant.max_runtime_instances} runtime instances",
                    active_instances=len(existing),
                )
            hosted = await self.start_host(HostLaunch.for_tenant(transport, tenant, snapshot))
        return ScaleOutOutcome(
            fulfilled=True,
            runtime_instance_id=hosted.runtime_instance_ids[0],
            reason=f"{transport} runtime-instance process '{hosted.host_id}' (pid {hosted.pid}) started",
            active_instances=len(existing) + 1,
        )

    # Stopping

    async def stop_host(self, host_id: str) -> int | None:
        """SIGTERM (the process unregisters its instances), SIGKILL after the grace period."""
        entry = self._hosts.pop(host_id, None)
        if entry is None:
            return None
        _, process = entry
        _signal(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout=self.settings.stop_grace_s)
        except TimeoutError:
            _signal(process, signal.SIGKILL)
            await process.wait()
        await self.registry.hot_state.redis.hdel(self.records_key, host_id)
        return process.returncode

    async def kill_host(self, host_id: str) -> int | None:
        """SIGKILL now: a crash. Its registry entries stay until their heartbeats lapse."""
        entry = self._hosts.pop(host_id, None)
        if entry is None:
            return None
        _, process = entry
        _signal(process, signal.SIGKILL)
        await process.wait()
        await self.registry.hot_state.redis.hdel(self.records_key, host_id)
        return process.returncode

    async def stop_all(self) -> None:
        await asyncio.gather(*(self.stop_host(host_id) for host_id in list(self._hosts)))


def _signal(process: asyncio.subprocess.Process, signum: int) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)


def _log_tail(log_path: str) -> str:
    path = Path(log_path)
    if not path.exists():
        return f"see {log_path}"
    tail = path.read_bytes()[-_LOG_TAIL_BYTES:].decode("utf-8", errors="replace").strip()
    return f"log {log_path}: ...{tail}" if tail else f"see {log_path}"
