"""Assembly of the MCPServer: tools, resources, prompt and (for HTTP) the OAuth resource server.

Owns the server's identity and instructions, the tools built from every spec behind the guard,
MCP Tasks in both protocol eras when the backend has a task service (`mcp_runtime.tasks`),
the run view as an MCP App (`mcp_runtime.apps`), the `run://` resource with its
subscriptions in both eras when the backend hears run events (`mcp_runtime.notifications`),
the request telemetry middleware (spans and the operation-duration metric), and the HTTP app
(`/mcp` behind the resource server of `mcp_runtime.auth`: static tokens and OAuth access
tokens, RFC 9728 metadata, 401 / 403 challenges, scope checks by each request's permission;
`X-API-Key` accepted, request bodies capped, unauthenticated `/livez`, `/readyz`, `/healthz`,
Prometheus `/metrics` and the `/metrics/targets` service discovery (behind a token when one is
configured), the dashboard under `/ui` when given). Must not contain tool behaviour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from mcp_runtime._backend import ToolBackend
from mcp_runtime._guard import ToolGuard
from mcp_runtime._http_limits import RequestSizeLimitMiddleware
from mcp_runtime._permissions import request_permission
from mcp_runtime._rbac import Authorizer
from mcp_runtime._recovery_tools import register_recovery_resources
from mcp_runtime._registration import build_tool
from mcp_runtime._resources import register_resources
from mcp_runtime.apps import RunViewApps, link_run_view, register_run_view_resources
from mcp_runtime.auth import (
    AccessAudit,
    ApiKeyHeaderMiddleware,
    BearerVerifier,
    ResourceServerMiddleware,
    ScopeCheck,
    TokenGate,
    protected_resource_metadata,
    protected_resource_routes,
)
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


MCP_PATH = "/mcp"


@dataclass(frozen=True)
class HttpAuth:
    """How `/mcp` authenticates (static tokens and the trusted issuers of `verifier`), what checks a
    request's scopes against roles (`authorizer`), and where refusals are recorded."""

    verifier: BearerVerifier
    authorizer: Authorizer
    audit: AccessAudit = field(default_factory=AccessAudit)


def build_server(backend: ToolBackend, guard: ToolGuard) -> MCPServer:
    """The MCP server; over HTTP, `http_app` puts its resource server in front (`HttpAuth`)."""
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
        tools=[link_run_view(build_tool(spec, guard)) for spec in specs],
        extensions=[*tasks.extensions, RunViewApps()],
        # Telemetry first: it measures the whole request, task and notification middleware included.
        middleware=[telemetry, *tasks.middleware, *(notifications.middleware if notifications else [])],
        subscriptions=notifications.bus if notifications else None,
    )
    register_resources(server, backend.catalog, guard, backend.describe_steps)
    register_recovery_resources(server, backend.recovery_reports, guard)
    register_run_view_resources(server, backend.run_view_reader(), guard)
    if notifications is not None:
        notifications.register(server)
    return server


MetricsTargets = Callable[[], Awaitable[Mapping[str, Mapping[str, str]]]]


def http_app(
    server: MCPServer,
    *,
    host: str,
    auth: HttpAuth | None = None,
    health: HealthService | None = None,
    metrics: MetricsExposition | None = None,
    metrics_gate: TokenGate | None = None,
    metrics_targets: MetricsTargets | None = None,
    dashboard: ASGIApp | None = None,
) -> ASGIApp:
    """The streamable HTTP app on `/mcp` (behind `auth`'s resource server; without `auth`, open:
    in-process tests only), request bodies capped at MAX_REQUEST_BYTES, plus, when given, open
    `/livez`, `/readyz` and `/healthz` (= readyz), `/metrics` and the Prometheus HTTP service
    discovery of the runtime-instance processes on `/metrics/targets` (both behind
    `metrics_gate` when given), the RFC 9728 metadata when OAuth issuers are trusted, and the
    dashboard (its own sign-in) on `/ui`."""
    if health is not None:
        for path, endpoint in health_endpoints(health).items():
            server.custom_route(path, methods=["GET"])(endpoint)
    if metrics is not None:
        endpoint = metrics_endpoint(metrics)
        server.custom_route(METRICS_PATH, methods=["GET"])(
            metrics_gate.guard(endpoint) if metrics_gate else endpoint
        )
    if metrics_targets is not None:
        targets = metrics_targets

        async def metrics_sd(request: Request) -> JSONResponse:
            return JSONResponse(sd_target_groups(await targets()))

        server.custom_route(SD_PATH, methods=["GET"])(
            metrics_gate.guard(metrics_sd) if metrics_gate else metrics_sd
        )

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    guarded: ASGIApp = app
    if auth is not None:
        guarded = _resource_server(app, auth)
    if dashboard is not None:
        app.mount("/ui", dashboard)
    return RequestSizeLimitMiddleware(ApiKeyHeaderMiddleware(guarded))


def _resource_server(app: Starlette, auth: HttpAuth) -> ASGIApp:
    """`/mcp` behind the bearer check; the RFC 9728 metadata routes when issuers are trusted."""
    oauth = auth.verifier.oauth
    metadata_url = None
    scope_check = None
    if oauth is not None:
        metadata = protected_resource_metadata(oauth.settings, oauth.scopes)
        metadata_url = str(build_resource_metadata_url(metadata.resource))
        for route in protected_resource_routes(metadata):
            app.router.routes.append(route)
        scope_check = ScopeCheck(request_permission, auth.authorizer.roles_allow, oauth.scopes)
    return ResourceServerMiddleware(
        app,
        auth.verifier,
        path=MCP_PATH,
        metadata_url=metadata_url,
        audit=auth.audit,
        scope_check=scope_check,
    )
