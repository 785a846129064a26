"""The runtime-instance process: K child runtime instances behind one HTTP or gRPC endpoint.

Owns the process lifecycle: set up tracing from the OTEL_* variables (flushed at the end),
wire the engine (`EngineServices`: hot state, DAG engine, durable store, audit, execution
control, metrics), resolve the control-plane id from the Redis discovery record (refuse to
start without one), open the command endpoint and the metrics endpoint (`/metrics` on the
HTTP command endpoint and/or a dedicated `--metrics-port`, with the capacity gauges of the
hosted instances), start and self-register the child instances (they heartbeat registry +
capacity themselves), put the heap the process started with out of the garbage collector's way
(`settle_started_heap`), then on SIGTERM / SIGINT (or when the parent process is gone) stop
and unregister them with the identity resolved at start (never re-resolving discovery) and
close the endpoints. Must not dispatch, admit or recover runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

from runtime_core.bootstrap import EngineServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.errors import RuntimeCoreError
from runtime_core.events import RunEventSubscriber
from runtime_core.hosting._commands import RuntimeCommands
from runtime_core.hosting._grpc_endpoint import GrpcCommandEndpoint
from runtime_core.hosting._heap import settle_started_heap
from runtime_core.hosting._http_endpoint import HttpCommandEndpoint, build_http_app
from runtime_core.hosting._options import RuntimeInstanceProcessOptions, parse_options
from runtime_core.hosting._uvicorn import EndpointBindError, UvicornEndpoint
from runtime_core.instances import (
    PORT_TAKEN_EXIT_CODE,
    ControlPlaneDescriptor,
    ControlPlaneDiscovery,
    HostTransport,
    InstanceDependencies,
    InstanceRegistry,
    LocalInstancePool,
    RunExecutionIndex,
    UnparkDoorbell,
)
from runtime_core.observability import configure_tracing, metrics_app, shutdown_tracing
from runtime_core.queueing import SharedQueue
from runtime_core.steps import PROVIDERS_FILE_ENV
from runtime_core.storage import DurableStoreSettings

log = logging.getLogger("runtime_core.hosting")

_PARENT_CHECK_INTERVAL_S = 1.0
# The default OpenTelemetry `service.name` of this process (OTEL_SERVICE_NAME overrides it).
PROCESS_SERVICE_NAME = "mcp-runtime-instance"
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class RuntimeInstanceHost:
    """The hosting side of one process: endpoint + pool; `start()` / `stop()`."""

    def __init__(self, options: RuntimeInstanceProcessOptions, services: EngineServices) -> None:
        self.options = options
        self.services = services
        hot_state = services.hot_state
        self.registry = InstanceRegistry(hot_state, options.tenant_catalog())
        # A run holding a concurrency key's slot gives it back where it ends.
        index = RunExecutionIndex(hot_state, key_release=SharedQueue(hot_state).release_key)
        self.pool = LocalInstancePool(
            InstanceDependencies(
                services.engine,
                self.registry,
                index,
                services.control,
                restorer=services.restorer,
                events=services.events,
                doorbell=UnparkDoorbell(RunEventSubscriber(hot_state)),
            )
        )
        self.commands = RuntimeCommands(self.pool)
        services.export_capacity_of(self.pool)
        self.health = services.health(loops=self._loops)
        self.endpoint = self._endpoint()
        self.metrics_server = self._metrics_server()
        self.control_plane: ControlPlaneDescriptor | None = None

    def _endpoint(self) -> HttpCommandEndpoint | GrpcCommandEndpoint:
        o = self.options
        if o.transport is HostTransport.HTTP:
            app = build_http_app(self.commands, self.health, self.services.metrics)
            return HttpCommandEndpoint(app, o.bind_host, o.port)
        return GrpcCommandEndpoint(self.commands, o.bind_host, o.port, self.health)

    def _metrics_server(self) -> UvicornEndpoint | None:
        """The dedicated `/metrics` port, when one is configured."""
        o = self.options
        if o.metrics_port is None:
            return None
        return UvicornEndpoint(
            metrics_app(self.services.metrics), o.bind_host, o.metrics_port, lifespan="off"
        )

    def _loops(self) -> dict[str, bool]:
        """Hosting instances is this process's job: ready only once they run, and while they do
        (a fenced incarnation - superseded or found Unsafe - runs no more)."""
        instances = self.pool.instances()
        return {
            "runtime_instances": bool(instances) and self.pool.loops_alive(),
            "runtime_instances_not_fenced": not any(instance.fenced for instance in instances),
        }

    async def start(self) -> None:
        discovery = ControlPlaneDiscovery(self.services.hot_state)
        self.control_plane = await discovery.resolve(timeout_s=self.options.discovery_timeout_s)
        if self.metrics_server is not None:
            await self.metrics_server.start()
        await self.endpoint.start()
        for settings in self.options.instance_settings(self.control_plane.control_plane_id):
            await self.pool.start_instance(settings)
        log.info(
            "runtime_instance_process.ready host_id=%s endpoint=%s control_plane_id=%s instances=%s",
            self.options.host_id,
            self.options.endpoint,
            self.control_plane.control_plane_id,
            ",".join(i.runtime_instance_id for i in self.pool.instances()),
        )

    async def stop(self) -> None:
        """Unregister every child instance (ids known since start), then close the endpoint."""
        await self.pool.stop_all()
        await self.endpoint.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        log.info("runtime_instance_process.stopped host_id=%s", self.options.host_id)


async def run_runtime_instance_process(
    options: RuntimeInstanceProcessOptions, *, stop: asyncio.Event | None = None
) -> None:
    """Run until `stop` is set (default: until SIGTERM / SIGINT, or the parent process is gone)."""
    installed = stop is None
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if installed:
        for signum in _STOP_SIGNALS:
            loop.add_signal_handler(signum, stop.set)
    settings = RuntimeSettings(
        data_dir=options.data_dir,
        redis_url=options.redis_url,
        redis_prefix=options.redis_prefix,
        plugins=options.step_plugins(),
        providers_file=options.providers_file or os.environ.get(PROVIDERS_FILE_ENV) or None,
        durable=DurableStoreSettings.from_env(),  # the same store as the control plane's
        # The tenants' submit rate limits and concurrency keys apply to the agents' child runs.
        control_plane=ControlPlaneSettings(tenants_file=options.tenants_file),
    )
    traced = configure_tracing(PROCESS_SERVICE_NAME)
    try:
        async with EngineServices(settings) as services:
            host = RuntimeInstanceHost(options, services)
            await host.start()
            settle_started_heap()
            try:
                await _wait_for_stop(stop, options.parent_pid)
            finally:
                await host.stop()
    finally:
        if traced:
            shutdown_tracing()  # export the spans still buffered
        if installed:
            for signum in _STOP_SIGNALS:
                loop.remove_signal_handler(signum)


async def _wait_for_stop(stop: asyncio.Event, parent_pid: int | None) -> None:
    if parent_pid is None:
        await stop.wait()
        return
    while not stop.is_set() and os.getppid() == parent_pid:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=_PARENT_CHECK_INTERVAL_S)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m runtime_core.hosting ...`: 0 after a clean stop, `PORT_TAKEN_EXIT_CODE` when
    it cannot listen (its host manager starts it again on another port), 2 when it cannot start."""
    options = parse_options(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(run_runtime_instance_process(options))
    except EndpointBindError as exc:
        print(f"runtime-instance {options.host_id}: {exc}", file=sys.stderr)
        return PORT_TAKEN_EXIT_CODE
    except (RuntimeCoreError, OSError) as exc:  # no discovery record, Redis down, port taken
        print(f"runtime-instance {options.host_id}: {exc}", file=sys.stderr)
        return 2
    return 0
