"""The dashboard's ASGI app, mounted under `/ui` on the HTTP server's Starlette app.

Owns the routes (sign in / out, runs list, run page and its actions, capacity, schedules, the live
streams, the vendored static files) and the assembly of their parts around one session
store, the server's own tool guard and token verifier, and the tool backend. Must not
contain page or action behaviour.
"""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from mcp_runtime._backend import ToolBackend
from mcp_runtime._guard import ToolGuard
from mcp_runtime.auth import BearerVerifier, DashboardSso
from mcp_runtime.dashboard._access import DashboardAccess
from mcp_runtime.dashboard._actions import DashboardActions
from mcp_runtime.dashboard._events import LiveStreams
from mcp_runtime.dashboard._login import DashboardLogin
from mcp_runtime.dashboard._pages import DashboardPages
from mcp_runtime.dashboard._security import SecurityHeadersMiddleware
from mcp_runtime.dashboard._sessions import SessionStore
from mcp_runtime.dashboard._settings import DashboardSettings
from mcp_runtime.dashboard._sso import SSO_PATH, DashboardSignOn
from mcp_runtime.run_view import Redactor


def dashboard_app(
    backend: ToolBackend,
    verifier: BearerVerifier,
    guard: ToolGuard,
    *,
    settings: DashboardSettings | None = None,
    stopping: asyncio.Event | None = None,
) -> ASGIApp:
    """The app to mount at `/ui`; `stopping` (the server's stop signal) ends the live streams."""
    settings = settings or DashboardSettings()
    access = DashboardAccess(verifier, guard, SessionStore(settings.session_ttl_s, settings.max_sessions))
    reader = backend.run_view_reader()
    redactor = Redactor.from_environment(secret_variables=backend.secret_variables)
    pages = DashboardPages(access, backend, reader, redactor)
    sign_on = DashboardSignOn(access, _single_sign_on(verifier), settings.session_ttl_s)
    login = DashboardLogin(access, settings.session_ttl_s, sign_on.providers)
    actions = DashboardActions(access, backend)
    streams = LiveStreams(access, backend, reader, settings, stopping or asyncio.Event())
    static = StaticFiles(packages=[("mcp_runtime.dashboard", "static"), ("mcp_runtime.run_view", "static")])
    routes = [
        Route("/", pages.home, methods=["GET"]),
        Route("/login", login.form, methods=["GET"]),
        Route("/login", login.submit, methods=["POST"]),
        Route("/logout", login.logout, methods=["POST"]),
        Route("/sso/callback", sign_on.callback, methods=["GET"]),
        Route("/sso/{provider}/start", sign_on.start, methods=["GET"]),
        Route("/runs", pages.runs, methods=["GET"]),
        Route("/runs/{run_id}", pages.run, methods=["GET"]),
        Route("/runs/{run_id}/{action}", actions.act, methods=["POST"]),
        Route("/capacity", pages.capacity, methods=["GET"]),
        Route("/schedules", pages.schedules, methods=["GET"]),
        Route("/events/runs", streams.runs, methods=["GET"]),
        Route("/events/runs/{run_id}", streams.run, methods=["GET"]),
        Mount("/static", static, name="static"),
    ]
    return SecurityHeadersMiddleware(Starlette(routes=routes))


def _single_sign_on(verifier: BearerVerifier) -> DashboardSso | None:
    """The OIDC sign-in through the trusted issuers that name a dashboard client, if any do."""
    oauth = verifier.oauth
    if oauth is None or not any(issuer.dashboard for issuer in oauth.settings.issuers):
        return None
    return DashboardSso(oauth, f"{oauth.settings.origin}{SSO_PATH}/callback")
