"""The HTTP command endpoint of a runtime-instance process: a starlette app served by uvicorn.

Owns the routes of `HTTP_ROUTES` (+ GET /livez, /readyz, /healthz, and GET /metrics when the
process exports metrics), reading path ids and JSON bodies into runtime commands (each traced
as a server span continuing the caller's `traceparent` header), answering response models as
JSON and runtime errors as the `{code, message, hint}` envelope with an HTTP status per code,
served by a UvicornEndpoint on the process's loopback port (signals stay with the process).
Must not decide anything about runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runtime_core.health import HealthService
from runtime_core.hosting._commands import RuntimeCommands, parse_json_object
from runtime_core.hosting._health_routes import health_endpoints
from runtime_core.hosting._uvicorn import UvicornEndpoint
from runtime_core.observability import MetricsExposition, metrics_route
from runtime_core.providers import HTTP_ROUTES, Command, WireError

_STATUS_BY_CODE = {
    "not_found": 404,
    "provider_unavailable": 404,
    "conflict": 409,
    "input_too_large": 413,
    "invalid_pipeline": 422,
    "invalid_request": 422,
    "missing_snapshot": 422,
    "store_unavailable": 503,
}

Endpoint = Callable[[Request], Awaitable[Response]]


def _json(body: str, status_code: int = 200) -> Response:
    return Response(body, status_code=status_code, media_type="application/json")


def _error(error: WireError) -> Response:
    return _json(error.model_dump_json(exclude_none=True), _STATUS_BY_CODE.get(error.code, 500))


def _command_endpoint(commands: RuntimeCommands, command: Command) -> Endpoint:
    method, route = HTTP_ROUTES[command]

    async def endpoint(request: Request) -> Response:
        body = parse_json_object(await request.body()) if request.method == "POST" else {}
        if isinstance(body, WireError):
            return _error(body)
        result = await commands.execute_traced(
            command,
            {**body, **request.path_params},
            span_name=f"{method} {route}",
            carrier=request.headers,
            attributes={"http.request.method": method, "http.route": route},
        )
        return _error(result) if isinstance(result, WireError) else _json(result.model_dump_json())

    return endpoint


def build_http_app(
    commands: RuntimeCommands, health: HealthService, metrics: MetricsExposition | None = None
) -> Starlette:
    """The command routes of `HTTP_ROUTES` plus GET /livez, /readyz, /healthz and, when an
    exposition is given, GET /metrics."""
    routes = [Route(path, endpoint, methods=["GET"]) for path, endpoint in health_endpoints(health).items()]
    routes += [
        Route(path, _command_endpoint(commands, command), methods=[method])
        for command, (method, path) in HTTP_ROUTES.items()
    ]
    if metrics is not None:
        routes.append(metrics_route(metrics))
    return Starlette(routes=routes)


class HttpCommandEndpoint(UvicornEndpoint):
    """The command app on the process's loopback port (no ASGI lifespan: nothing to start)."""

    def __init__(self, app: Starlette, host: str, port: int) -> None:
        super().__init__(app, host, port, lifespan="off")
