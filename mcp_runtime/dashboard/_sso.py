"""Single sign-on pages of the dashboard: start a sign-in at the identity provider, come back, sign out.

Owns the routes around `mcp_runtime.auth.DashboardSso`: `GET /ui/sso/{provider}/start` (a fresh
browser-binding cookie, HttpOnly, SameSite=Lax so it comes back on the provider's redirect,
Secure over https, then the provider's authorization URL), `GET /ui/sso/callback` (state, code and
nonce checked, the session opened for the principal the provider's access token maps to, the
refusal audited and shown otherwise), and the pages that move the browser on with a same-site
navigation (a meta refresh: the session cookie is SameSite=Strict and would not ride along on
the provider's cross-site redirect; a redirect answering the sign-out form could not leave the
origin under the CSP's form-action). Must never show, log or keep a token.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_runtime.auth import DashboardSso, RefusalReason, SignInError, TokenRefusedError
from mcp_runtime.dashboard._access import DashboardAccess
from mcp_runtime.dashboard._security import UI_PATH, safe_next, set_session_cookie
from mcp_runtime.dashboard._templates import page

SSO_COOKIE = "mcprt_sso"
SSO_PATH = f"{UI_PATH}/sso"


def moving_on(request: Request, heading: str, message: str, target: str, **context: object) -> Response:
    """A page that sends the browser to `target` by itself (and says so, with a link)."""
    return page(request, "moving_on.html.j2", heading=heading, message=message, target=target, **context)


class DashboardSignOn:
    def __init__(self, access: DashboardAccess, sso: DashboardSso | None, session_ttl_s: int) -> None:
        self.access = access
        self.sso = sso
        self.session_ttl_s = session_ttl_s

    @property
    def providers(self) -> list[tuple[str, str]]:
        """(slug, display name) of each provider the login page offers."""
        return [(p.slug, p.display_name) for p in self.sso.providers.values()] if self.sso else []

    async def start(self, request: Request) -> Response:
        if self.sso is None:
            return self._failed(request, SignInError("not_found", "Single sign-on is not configured."), 404)
        browser = secrets.token_urlsafe(32)
        target = safe_next(request.query_params.get("next"))
        try:
            url = await self.sso.start(request.path_params["provider"], browser, target)
        except SignInError as exc:
            return self._failed(request, exc, 404 if exc.code == "not_found" else 502)
        response = RedirectResponse(url, status_code=303)
        response.set_cookie(
            SSO_COOKIE,
            browser,
            max_age=600,
            path=SSO_PATH,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )
        return response

    async def callback(self, request: Request) -> Response:
        params = request.query_params
        if self.sso is None:
            return self._failed(request, SignInError("not_found", "Single sign-on is not configured."), 404)
        if "error" in params:
            error = params["error"] if params["error"].isidentifier() else "error"
            self.access.audit.refused(
                RefusalReason.PERMISSION_DENIED,
                status=401,
                path=request.url.path,
                detail=f"identity provider answered {error}",
            )
            return self._failed(
                request, SignInError("sign_in_refused", f"The identity provider answered {error}.")
            )
        try:
            signed_in, target = await self.sso.complete(
                params.get("state", ""), params.get("code", ""), request.cookies.get(SSO_COOKIE)
            )
        except SignInError as exc:
            return self._failed(request, exc)
        except TokenRefusedError as exc:
            self.access.audit.refused(exc.reason, status=401, path=request.url.path, detail=exc.description)
            return self._failed(
                request, SignInError(exc.reason.value, f"Sign-in refused: {exc.description}."), 401
            )
        session_id, _ = self.access.open_session(signed_in.principal, signed_in.sign_out_url)
        response = moving_on(request, "Signed in", "You are signed in.", target)
        set_session_cookie(response, request, session_id, self.session_ttl_s)
        response.delete_cookie(SSO_COOKIE, path=SSO_PATH, secure=request.url.scheme == "https")
        return response

    @staticmethod
    def _failed(request: Request, exc: SignInError, status_code: int = 400) -> Response:
        message = f"[{exc.code}] {exc} Next: sign in again from the login page."
        return page(
            request, "error.html.j2", status_code=status_code, heading="Sign-in failed", message=message
        )
