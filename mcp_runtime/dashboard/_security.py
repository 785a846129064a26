"""Browser-facing protections of the dashboard: security headers, cookies, CSRF, safe redirects.

Owns the Content-Security-Policy (scripts, styles and connections from this origin only: the
page needs nothing else), the other hardening headers, how the session cookie is set and
cleared (HttpOnly, SameSite=Strict, Path=/ui, Secure over https), the pre-login nonce that
protects the login form, and which `next` targets a login may redirect to. Must not decide
who may do what: the tool guard does.
"""

from __future__ import annotations

import hmac
import secrets

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_runtime.dashboard._sessions import SESSION_COOKIE

UI_PATH = "/ui"
LOGIN_NONCE_COOKIE = "mcprt_login"
LOGIN_NONCE_TTL_S = 900

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}


class SecurityHeadersMiddleware:
    """Adds the hardening headers to every dashboard response; pages and streams are never cached."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    headers[name] = value
                if not scope["path"].startswith(f"{UI_PATH}/static/"):
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(response: Response, request: Request, session_id: str, max_age_s: int) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=max_age_s,
        path=UI_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path=UI_PATH, httponly=True, samesite="strict", secure=_secure(request)
    )


def new_login_nonce() -> str:
    """The login form carries this nonce and the browser a cookie with it: a forged login has neither."""
    return secrets.token_urlsafe(24)


def set_login_nonce(response: Response, request: Request, nonce: str) -> None:
    response.set_cookie(
        LOGIN_NONCE_COOKIE,
        nonce,
        max_age=LOGIN_NONCE_TTL_S,
        path=f"{UI_PATH}/login",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def login_nonce_matches(request: Request, presented: str | None) -> bool:
    expected = request.cookies.get(LOGIN_NONCE_COOKIE)
    return bool(expected and presented) and hmac.compare_digest(str(expected), str(presented))


def clear_login_nonce(response: Response, request: Request) -> None:
    response.delete_cookie(LOGIN_NONCE_COOKIE, path=f"{UI_PATH}/login", secure=_secure(request))


def safe_next(target: str | None) -> str:
    """Only a path inside the dashboard (never another host, scheme or `//host`)."""
    fallback = f"{UI_PATH}/runs"
    if not target or not target.startswith(f"{UI_PATH}/") or target.startswith("//") or "\\" in target:
        return fallback
    return target
