"""The HTTP command endpoint of a runtime-instance process: a starlette app served by uvicorn.

Owns the routes of `HTTP_ROUTES` (+ GET /healthz, and GET /metrics when the process exports
metrics), reading path ids and JSON bodies into runtime commands (each traced as a server
span continuing the caller's `traceparent` header), answering response models as JSON and
runtime errors as the `{code, message, hint}` envelope with an HTTP status per code, and the
uvicorn server bound to a loopback port (signals stay with the process), which also serves a
dedicated metrics port. Must not decide anything about runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from runtime_core.hosting._commands import RuntimeCommands, parse_json_object
from runtime_core.observability import MetricsExposition, metrics_route
from runtime_core.providers import HEALTH_PATH, HTTP_ROUTES, Command, WireError

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
    commands: RuntimeCommands,
    health: Callable[[], dict[str, object]],
    metrics: MetricsExposition | None = None,
) -> Starlette:
    """The command routes, `/healthz`, and `/metrics` when an exposition is given."""

    async def healthz(_: Request) -> Response:
        return JSONResponse(health())

    routes = [Route(HEALTH_PATH, healthz, methods=["GET"])]
    routes += [
        Route(path, _command_endpoint(commands, command), methods=[method])
        for command, (method, path) in HTTP_ROUTES.items()
    ]
    if metrics is not None:
        routes.append(metrics_route(metrics))
    return Starlette(routes=routes)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """The process handles SIGTERM / SIGINT itself (unregister first, then stop serving)."""
        yield


class HttpCommandEndpoint:
    """Serves a starlette app with uvicorn on one port: the command app, or the metrics app."""

    def __init__(self, app: Starlette, host: str, port: int) -> None:
        self.host = host
        self.port = port
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Bind (errors surface here), then serve until `stop()`."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="http-command-endpoint")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the HTTP command endpoint stopped while starting")
            await asyncio.sleep(0.01)  # uvicorn exposes no started event

    async def stop(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._task = None
