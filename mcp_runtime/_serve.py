"""`mcp-runtime serve`: run the MCP server over stdio or streamable HTTP on a started runtime.

Owns the serve lifecycle: load the configuration (or the embedded default), set up tracing
from the OTEL_* variables, start the runtime services, pick the principal source for the
transport (over HTTP also mount the dashboard on `/ui`, behind the same guard and token
verifier, its live streams ended by the stop signal, and serve `/metrics`), serve (plus
`/metrics` on `--metrics-port` when asked) until the client leaves or a signal arrives, then
close the services (which unregisters their instances) and flush the buffered spans. Must
not write to stdout in stdio mode: stdout is the protocol channel.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from mcp_runtime._backend import ToolBackend
from mcp_runtime._config import ServerConfig, default_server_config, load_server_config
from mcp_runtime._guard import BearerPrincipal, FixedPrincipal, ToolGuard
from mcp_runtime._rbac import Authorizer
from mcp_runtime._server import HttpAuth, build_server, http_app
from mcp_runtime.auth import (
    AccessAudit,
    BearerVerifier,
    ConfiguredTokenVerifier,
    OAuthVerifier,
    ScopeMap,
    TokenGate,
)
from mcp_runtime.dashboard import DashboardSettings, dashboard_app
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.errors import ConfigurationError
from runtime_core.health import HealthService
from runtime_core.hosting import UvicornEndpoint, settle_started_heap
from runtime_core.observability import configure_tracing, metrics_app, shutdown_tracing
from runtime_core.pipeline import PipelineCatalog
from runtime_core.plugins import StepPluginSettings

log = logging.getLogger("mcp_runtime.serve")


class _ShutdownSignals:
    """SIGINT / SIGTERM: stop serving, close the runtime services, then end as the signal asks.

    A signal during start-up is held until the services are up (so they always close); a
    second signal ends the process at once. Ending with the signal itself matters for
    stdio: the SDK's stdin reader thread may stay blocked, so the process cannot just return.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> _ShutdownSignals:
        for sig in _STOP_SIGNALS:
            self._loop.add_signal_handler(sig, self._on_signal, sig)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig in _STOP_SIGNALS:
            self._loop.remove_signal_handler(sig)

    def _on_signal(self, sig: int) -> None:
        if self.received is not None:
            self._end_process(sig)
        log.info("shutdown requested by %s", signal.Signals(sig).name)
        self.received = sig
        self.stop.set()

    def end_like_the_signal(self) -> None:
        if self.received is not None:
            log.info("runtime services closed; exiting on %s", signal.Signals(self.received).name)
            self._end_process(self.received)

    @staticmethod
    def _end_process(sig: int) -> None:
        signal.signal(sig, signal.SIG_DFL)
        signal.raise_signal(sig)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ServeOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    config_path: Path | None = None
    data_dir: Path | None = None
    principal: str | None = None
    metrics_port: int | None = None
    metrics_host: str | None = None
    steps: tuple[str, ...] = ()
    providers_file: Path | None = None


# The default OpenTelemetry `service.name` of the control plane (OTEL_SERVICE_NAME overrides it).
SERVICE_NAME = "mcp-runtime"


def resolve_config(options: ServeOptions) -> ServerConfig:
    return load_server_config(options.config_path) if options.config_path else default_server_config()


async def serve(options: ServeOptions) -> None:
    config = resolve_config(options)
    missing = config.oauth.missing_secrets() if config.oauth else []
    if missing:
        raise ConfigurationError(
            f"the oauth section names client secrets in {', '.join(missing)}, which are not set",
            hint="set those environment variables before starting serve",
        )
    scopes = ScopeMap.load(config.oauth.scopes_file) if config.oauth else ScopeMap.load()
    authorizer = Authorizer(config.rbac_model, config.rbac_policy, scopes)
    catalog = PipelineCatalog.from_directory(config.pipelines_dir)
    plugins = StepPluginSettings.from_env().with_references([*config.steps, *options.steps])
    settings = RuntimeSettings.from_env(
        data_dir=options.data_dir,
        providers_file=options.providers_file or config.providers_file,
        plugins=plugins,
    )
    traced = configure_tracing(SERVICE_NAME)
    with _ShutdownSignals() as shutdown:
        try:
            async with RuntimeServices(settings) as services:
                backend = ToolBackend.from_services(services, catalog)
                registry = backend.metrics.registry if backend.metrics else None
                audit = AccessAudit(registry, services.durable_store.append_ledger)
                guard_parts = _GuardParts(authorizer, audit)
                # Like a runtime-instance process: the started heap leaves the collector's reach,
                # so a huge submit or a wide in-process run pays collections of its own objects only.
                settle_started_heap()
                async with _metrics_port(options, backend, _metrics_gate(config, audit)):
                    if shutdown.received is None and options.transport == "stdio":
                        await _serve_stdio(options, config, backend, guard_parts, shutdown)
                    elif shutdown.received is None:
                        await _serve_http(options, config, backend, guard_parts, shutdown, services.health())
                await audit.flush()
        finally:
            if traced:
                shutdown_tracing()  # export the buffered spans before the process ends
        shutdown.end_like_the_signal()


@dataclass(frozen=True)
class _GuardParts:
    authorizer: Authorizer
    audit: AccessAudit


def _metrics_gate(config: ServerConfig, audit: AccessAudit) -> TokenGate | None:
    return TokenGate(config.metrics_token_sha256, audit) if config.metrics_token_sha256 else None


@asynccontextmanager
async def _metrics_port(
    options: ServeOptions, backend: ToolBackend, gate: TokenGate | None
) -> AsyncIterator[None]:
    """`GET /metrics` on `--metrics-host`:`--metrics-port` (the only way to scrape a stdio server; for
    HTTP a separate address, e.g. a private interface) while serving."""
    if options.metrics_port is None or backend.metrics is None:
        yield
        return
    host = options.metrics_host or options.host
    endpoint = UvicornEndpoint(
        metrics_app(backend.metrics, gate.guard if gate else None), host, options.metrics_port, lifespan="off"
    )
    await endpoint.start()
    log.info("serving Prometheus metrics on http://%s:%d/metrics", host, options.metrics_port)
    try:
        yield
    finally:
        await endpoint.stop()


async def _serve_stdio(
    options: ServeOptions,
    config: ServerConfig,
    backend: ToolBackend,
    parts: _GuardParts,
    shutdown: _ShutdownSignals,
) -> None:
    """Serve until the client closes stdin, or until a stop signal (the reader is then left behind)."""
    name = options.principal or config.stdio_principal
    if name is None:
        raise ValueError("stdio needs a principal: pass --principal or set stdio_principal in the config")
    guard = ToolGuard(FixedPrincipal(config.principal(name)), parts.authorizer, parts.audit)
    log.info("serving MCP over stdio as principal %s", name)
    serving = asyncio.create_task(build_server(backend, guard).run_stdio_async())
    stopping = asyncio.create_task(shutdown.stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if serving.done():
        serving.result()


async def _serve_http(
    options: ServeOptions,
    config: ServerConfig,
    backend: ToolBackend,
    parts: _GuardParts,
    shutdown: _ShutdownSignals,
    health: HealthService,
) -> None:
    """Serve until a stop signal (or until the HTTP server fails); "serving" is logged once bound."""
    oauth = OAuthVerifier(config.oauth, parts.authorizer.scopes) if config.oauth else None
    verifier = BearerVerifier(ConfiguredTokenVerifier(config), oauth)
    guard = ToolGuard(BearerPrincipal(), parts.authorizer, parts.audit)
    server = build_server(backend, guard)
    dashboard = dashboard_app(
        backend, verifier, guard, settings=DashboardSettings.from_env(), stopping=shutdown.stop
    )
    separate_metrics = options.metrics_port is not None
    app = http_app(
        server,
        host=options.host,
        auth=HttpAuth(verifier, parts.authorizer, parts.audit),
        health=health,
        metrics=None if separate_metrics else backend.metrics,
        metrics_gate=_metrics_gate(config, parts.audit),
        metrics_targets=backend.control_plane.metrics_endpoints,
        dashboard=dashboard,
    )
    endpoint = UvicornEndpoint(app, options.host, options.port)
    try:
        await endpoint.start()
        await _serve_until_stopped(options, endpoint, shutdown)
    finally:
        await verifier.aclose()


async def _serve_until_stopped(
    options: ServeOptions, endpoint: UvicornEndpoint, shutdown: _ShutdownSignals
) -> None:
    try:
        log.info(
            "serving MCP over streamable HTTP on http://%s:%d/mcp (dashboard on /ui)",
            options.host,
            endpoint.port,
        )
        stopping = asyncio.create_task(shutdown.stop.wait())
        await asyncio.wait({endpoint.task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if endpoint.task.done():
            endpoint.task.result()  # the server ended by itself: report why
    finally:
        await endpoint.stop()
