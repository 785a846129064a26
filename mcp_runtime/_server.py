"""Assembly of the MCPServer: tools, resources, prompt and (for HTTP) bearer authentication.

Owns the server's identity and instructions, the tools built from every spec behind the guard,
MCP Tasks in both protocol eras when the backend has a task service (`mcp_runtime.tasks`),
the run view as an MCP App (`mcp_runtime.apps`), the `run://` resource with its
subscriptions in both eras when the backend hears run events (`mcp_runtime.notifications`),
the request telemetry middleware (spans and the operation-duration metric), and the HTTP app
(bearer auth via the SDK's token verifier, `X-API-Key` accepted, request bodies capped,
unauthenticated `/livez`, `/readyz`, `/healthz`, Prometheus `/metrics` and the
`/metrics/targets` service discovery, the dashboard under `/ui` when given). Must not contain
tool behaviour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from mcp_runtime._backend import ToolBackend
from mcp_runtime._guard import ToolGuard
from mcp_runtime._http_limits import RequestSizeLimitMiddleware
from mcp_runtime._registration import build_tool
from mcp_runtime._resources import register_resources
from mcp_runtime._tokens import ApiKeyHeaderMiddleware, ConfiguredTokenVerifier
from mcp_runtime.apps import RunViewApps, link_run_view, register_run_view_resources
from mcp_runtime.notifications import notification_support
from mcp_runtime.observability import McpOperationMetrics, McpTelemetryMiddleware
from mcp_runtime.tasks import TaskSupport, task_support
from runtime_core.health import HealthService
from runtime_core.hosting import health_endpoints
from runtime_core.observability import (
    METRICS_PATH,
    SD_PATH,
    MetricsExposition,
    metrics_endpoint,
    sd_target_groups,
)

SERVER_NAME = "mcp-runtime"
INSTRUCTIONS = """Control plane of a deterministic, distributed AI-workflow runtime.
Typical flow: `pipelines.list` -> `submit` (returns a shared_run_id) -> `queue.drain` ->
poll `run.status` until done -> `ledger` / `trace`. A client declaring MCP Tasks gets a task
from `submit` / `replay` instead and follows it with tasks/get; or subscribe to the resource
run://<shared_run_id>, or send a progress token with `submit`. Every call runs as your
principal's tenant; ids of other tenants answer "not found". Errors start with a [code]
and say what to do next. The prompt `run_pipeline` walks through it; `pipeline://<name>`
resources hold definitions; `steps.list` (or `step://<stepKey>`) shows each step type and
the JSON Schema of its `config`."""


def build_server(
    backend: ToolBackend, guard: ToolGuard, *, token_verifier: ConfiguredTokenVerifier | None = None
) -> MCPServer:
    """The MCP server; pass `token_verifier` to require bearer tokens (streamable HTTP)."""
    auth = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None) if token_verifier else None
    specs = backend.tool_specs()
    operation_metrics = McpOperationMetrics.of(backend.metrics.registry) if backend.metrics else None
    telemetry = McpTelemetryMiddleware(operation_metrics, frozenset(spec.name for spec in specs))
    tasks = task_support(backend.tasks, guard) if backend.tasks is not None else TaskSupport([], [])
    notifications = (
        notification_support(backend.run_events, backend.control_plane, guard)
        if backend.run_events is not None
        else None
    )
    server: MCPServer = MCPServer(
        SERVER_NAME,
        title="MCP Runtime control plane",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        token_verifier=token_verifier,
        auth=auth,
        tools=[link_run_view(build_tool(spec, guard)) for spec in specs],
        extensions=[*tasks.extensions, RunViewApps()],
        # Telemetry first: it measures the whole request, task and notification middleware included.
        middleware=[telemetry, *tasks.middleware, *(notifications.middleware if notifications else [])],
        subscriptions=notifications.bus if notifications else None,
    )
    register_resources(server, backend.catalog, guard, backend.describe_steps)
    register_run_view_resources(server, backend.run_view_reader(), guard)
    if notifications is not None:
        notifications.register(server)
    return server


MetricsTargets = Callable[[], Awaitable[Mapping[str, Mapping[str, str]]]]


def http_app(
    server: MCPServer,
    *,
    host: str,
    health: HealthService | None = None,
    metrics: MetricsExposition | None = None,
    metrics_targets: MetricsTargets | None = None,
    dashboard: ASGIApp | None = None,
) -> ASGIApp:
    """The streamable HTTP app on `/mcp` (bearer auth as configured, request bodies capped at
    MAX_REQUEST_BYTES) plus, when given, open `/livez`, `/readyz` and `/healthz` (= readyz),
    `/metrics`, the Prometheus HTTP service discovery of the runtime-instance processes on
    `/metrics/targets`, and the dashboard (its own sign-in) on `/ui`."""
    if health is not None:
        for path, endpoint in health_endpoints(health).items():
            server.custom_route(path, methods=["GET"])(endpoint)
    if metrics is not None:
        server.custom_route(METRICS_PATH, methods=["GET"])(metrics_endpoint(metrics))
    if metrics_targets is not None:
        targets = metrics_targets

        @server.custom_route(SD_PATH, methods=["GET"])
        async def metrics_sd(request: Request) -> JSONResponse:
            return JSONResponse(sd_target_groups(await targets()))

    app = server.streamable_http_app(host=host)
    if dashboard is not None:
        app.mount("/ui", dashboard)
    return RequestSizeLimitMiddleware(ApiKeyHeaderMiddleware(app))
