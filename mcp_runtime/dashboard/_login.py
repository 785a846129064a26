"""Signing in and out of the dashboard.

Owns the login page (the single sign-on providers, a token field and the pre-login nonce),
checking a submitted static token (through the same verifier as bearer tokens), opening the
session and its cookie, the redirect back to the page the user wanted (inside the dashboard
only), and signing out (the session ends server-side and the cookie is cleared; a CSRF token
is required; a single sign-on session then goes on to its provider's RP-initiated logout).
Must never log, store or echo a submitted token.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_runtime.dashboard._access import DashboardAccess
from mcp_runtime.dashboard._security import (
    UI_PATH,
    clear_login_nonce,
    clear_session_cookie,
    login_nonce_matches,
    new_login_nonce,
    safe_next,
    set_login_nonce,
    set_session_cookie,
)
from mcp_runtime.dashboard._sso import moving_on
from mcp_runtime.dashboard._templates import page

STALE_FORM = (
    "[csrf_refused] This form is stale or did not come from this dashboard. Next: reload the page and "
    "send it again."
)


def refused_form(request: Request) -> Response:
    return page(request, "error.html.j2", status_code=403, heading="Refused", message=STALE_FORM)


class DashboardLogin:
    def __init__(
        self, access: DashboardAccess, session_ttl_s: int, providers: list[tuple[str, str]] | None = None
    ) -> None:
        self.access = access
        self.session_ttl_s = session_ttl_s
        self.providers = providers or []

    async def form(self, request: Request) -> Response:
        target = safe_next(request.query_params.get("next"))
        if self.access.user(request) is not None:
            return RedirectResponse(target, status_code=303)
        return self._login_page(request, target)

    async def submit(self, request: Request) -> Response:
        form = await request.form()
        target = safe_next(str(form.get("next") or ""))
        if not login_nonce_matches(request, str(form.get("nonce") or "")):
            return refused_form(request)
        opened = self.access.login(str(form.get("token") or ""))
        if opened is None:
            error = "That token is not configured for any principal. Check it and try again."
            return self._login_page(request, target, error=error, status_code=401)
        session_id, _ = opened
        response = RedirectResponse(target, status_code=303)
        set_session_cookie(response, request, session_id, self.session_ttl_s)
        clear_login_nonce(response, request)
        return response

    async def logout(self, request: Request) -> Response:
        user = self.access.user(request)
        sign_out_url = None
        if user is not None:
            form = await request.form()
            if not user.session.csrf_matches(str(form.get("csrf") or "")):
                return refused_form(request)
            sign_out_url = user.session.sign_out_url
            self.access.logout(request)
        if sign_out_url:
            message = "Signed out here; now signing out at the identity provider."
            response = moving_on(request, "Signing out", message, sign_out_url)
        else:
            response = RedirectResponse(f"{UI_PATH}/login", status_code=303)
        clear_session_cookie(response, request)
        return response

    def _login_page(
        self, request: Request, target: str, *, error: str | None = None, status_code: int = 200
    ) -> Response:
        nonce = new_login_nonce()
        response = page(
            request,
            "login.html.j2",
            status_code=status_code,
            nonce=nonce,
            next=target,
            error=error,
            providers=self.providers,
        )
        set_login_nonce(response, request, nonce)
        return response
