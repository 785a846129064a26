"""Single sign-on for the dashboard: this server as an OpenID Connect relying party of a trusted issuer.

Owns the authorization code flow with PKCE (S256): starting a sign-in (fresh `state`, `nonce` and
code verifier, kept server-side for ten minutes and bound to the browser that started it by the
sha256 of a cookie value), completing it once (the code exchanged at the issuer's token endpoint
with the verifier and the RFC 8707 `resource`; the ID token verified: signature, `iss`, `aud` =
the dashboard's client, `exp`, and the `nonce`), the principal (from the access token, through the
same verifier and claim mapping as MCP calls, so a browser user is exactly the tenant and roles an
MCP client would be), and the RP-initiated logout URL when the issuer offers one. No token is kept
once the session is open. Must not set cookies or render pages: the dashboard does.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from mcp_runtime.auth._issuer_keys import IssuerKeys, IssuerUnavailableError
from mcp_runtime.auth._jwt import verify_signed
from mcp_runtime.auth._principal import Principal
from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._settings import DashboardClientSettings
from mcp_runtime.auth._verifier import OAuthVerifier

SIGN_IN_TTL_S = 600
MAX_PENDING_SIGN_INS = 10_000


class SignInError(Exception):
    """A sign-in that cannot complete; `code` and the message are safe to show."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SsoProvider:
    """One issuer the dashboard can sign in through."""

    slug: str
    display_name: str
    issuer: IssuerKeys
    client: DashboardClientSettings


@dataclass(frozen=True)
class PendingSignIn:
    provider: str
    nonce: str
    code_verifier: str
    browser: str  # sha256 of the value of the browser's sign-in cookie
    next_path: str
    expires_at: float


@dataclass(frozen=True)
class SignedIn:
    principal: Principal
    sign_out_url: str | None


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class DashboardSso:
    def __init__(
        self, oauth: OAuthVerifier, redirect_uri: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._oauth = oauth
        self.redirect_uri = redirect_uri
        self._clock = clock
        self._pending: OrderedDict[str, PendingSignIn] = OrderedDict()
        self.providers = {
            provider.slug: provider
            for provider in (
                SsoProvider(
                    str(index),
                    issuer.issuer.dashboard.display_name or issuer.issuer.issuer,
                    issuer,
                    issuer.issuer.dashboard,
                )
                for index, issuer in enumerate(oauth.issuers.values())
                if issuer.issuer.dashboard is not None
            )
        }

    async def start(self, slug: str, browser_secret: str, next_path: str) -> str:
        """The issuer's authorization URL for a new sign-in bound to `browser_secret`."""
        provider = self.providers.get(slug)
        if provider is None:
            raise SignInError("not_found", f"No sign-in provider '{slug}'.")
        try:
            endpoint = (await provider.issuer.metadata()).authorization_endpoint
        except IssuerUnavailableError as exc:
            raise SignInError(
                "idp_unavailable", f"{provider.display_name} cannot be reached ({exc})."
            ) from None
        if not endpoint:
            raise SignInError(
                "idp_misconfigured", f"{provider.display_name} names no authorization endpoint."
            )
        state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
        self._remember(
            state,
            PendingSignIn(
                slug, nonce, verifier, _sha256(browser_secret), next_path, self._clock() + SIGN_IN_TTL_S
            ),
        )
        query = {
            "response_type": "code",
            "client_id": provider.client.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": " ".join(provider.client.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": _challenge(verifier),
            "code_challenge_method": "S256",
            "resource": self._oauth.settings.resource,
        }
        return f"{endpoint}?{urlencode(query)}"

    async def complete(self, state: str, code: str, browser_secret: str | None) -> tuple[SignedIn, str]:
        """(the signed-in principal and its provider's logout URL, the page to go to) for a callback."""
        pending = self._pending.pop(state, None)
        if pending is None or pending.expires_at <= self._clock():
            raise SignInError("sign_in_expired", "This sign-in expired or was already used.")
        if browser_secret is None or not secrets.compare_digest(pending.browser, _sha256(browser_secret)):
            raise SignInError("sign_in_refused", "This sign-in was started in another browser.")
        provider = self.providers[pending.provider]
        tokens = await self._exchange(provider, code, pending.code_verifier)
        await self._check_id_token(provider, tokens.get("id_token"), pending.nonce)
        access_token = tokens.get("access_token")
        if not isinstance(access_token, str):
            raise SignInError("idp_misconfigured", f"{provider.display_name} returned no access token.")
        principal, _ = await self._oauth.authenticate(access_token)
        return SignedIn(principal, await self._sign_out_url(provider)), pending.next_path

    def _remember(self, state: str, pending: PendingSignIn) -> None:
        now = self._clock()
        while self._pending and (
            len(self._pending) >= MAX_PENDING_SIGN_INS or next(iter(self._pending.values())).expires_at <= now
        ):
            self._pending.popitem(last=False)
        self._pending[state] = pending

    async def _exchange(self, provider: SsoProvider, code: str, verifier: str) -> dict[str, Any]:
        metadata = await provider.issuer.metadata()
        if not metadata.token_endpoint:
            raise SignInError("idp_misconfigured", f"{provider.display_name} names no token endpoint.")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
            "client_id": provider.client.client_id,
            "resource": self._oauth.settings.resource,
        }
        secret = provider.client.client_secret()
        auth = (provider.client.client_id, secret) if secret is not None else None
        try:
            answer = await self._oauth.http.post(metadata.token_endpoint, data=form, auth=auth)
        except httpx.HTTPError as exc:
            raise SignInError(
                "idp_unavailable", f"{provider.display_name} did not answer ({type(exc).__name__})."
            ) from None
        if answer.status_code != 200:
            error = _error_code(answer)
            raise SignInError("sign_in_refused", f"{provider.display_name} refused the sign-in ({error}).")
        tokens = answer.json()
        return tokens if isinstance(tokens, dict) else {}

    async def _check_id_token(self, provider: SsoProvider, id_token: object, nonce: str) -> None:
        if not isinstance(id_token, str):
            raise SignInError(
                "idp_misconfigured", f"{provider.display_name} returned no ID token (scope openid?)."
            )
        claims = await verify_signed(
            id_token,
            provider.issuer,
            audiences=(provider.client.client_id,),
            leeway=self._oauth.settings.clock_skew_s,
        )
        if not secrets.compare_digest(str(claims.get("nonce", "")), nonce):
            raise TokenRefusedError(
                RefusalReason.INVALID_CLAIMS, "the ID token's nonce is not this sign-in's"
            )

    async def _sign_out_url(self, provider: SsoProvider) -> str | None:
        endpoint = (await provider.issuer.metadata()).end_session_endpoint
        if not endpoint:
            return None
        after = self.redirect_uri.rsplit("/sso/", 1)[0] + "/login"
        query = {"client_id": provider.client.client_id, "post_logout_redirect_uri": after}
        return f"{endpoint}?{urlencode(query)}"


def _error_code(answer: httpx.Response) -> str:
    try:
        error = answer.json().get("error")
    except ValueError:
        error = None
    return str(error) if isinstance(error, str) and error.isidentifier() else f"HTTP {answer.status_code}"
