"""The HTTP face of a process's health: GET /livez, /readyz and /healthz (= /readyz).

Owns the paths and the status codes (200 alive / ready, 503 not ready) with the report as
the JSON body. Must not check anything itself: `runtime_core.health` does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse

from runtime_core.health import HealthReport, HealthService

LIVE_PATH = "/livez"
READY_PATH = "/readyz"
HEALTH_ALIAS_PATH = "/healthz"

HealthEndpoint = Callable[[Request], Awaitable[JSONResponse]]


def _response(report: HealthReport) -> JSONResponse:
    return JSONResponse(report.model_dump(mode="json"), status_code=200 if report.healthy else 503)


def health_endpoints(health: HealthService) -> dict[str, HealthEndpoint]:
    """Path -> GET endpoint, for a starlette app or an MCP server's custom routes."""

    async def live(_: Request) -> JSONResponse:
        return _response(health.live())

    async def ready(_: Request) -> JSONResponse:
        return _response(await health.ready())

    return {LIVE_PATH: live, READY_PATH: ready, HEALTH_ALIAS_PATH: ready}
