"""Bearer token -> principal: configured static tokens first, then the trusted OAuth issuers.

Owns `OAuthVerifier` (a JWT verified against its issuer's keys, or an opaque token introspected,
then mapped to a principal by the issuer's claim paths and the scopes file; a verified JWT's
principal is reused, keyed by the token's sha256, until its `exp` or for at most
VERIFIED_JWT_TTL_S, and only while its signing key is still among the issuer's keys), `BearerVerifier`
(static digests, then OAuth; the SDK's `TokenVerifier`), and the verified caller handed to the
MCP transport (`PrincipalUser`: the SDK's authenticated user carrying our principal; its
AccessToken holds the token's sha256, never the token). Must not log or keep a token.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from mcp_runtime.auth._claims import principal_from_claims
from mcp_runtime.auth._introspection import Introspector
from mcp_runtime.auth._issuer_keys import IssuerKeys
from mcp_runtime.auth._jwt import JwtVerifier, looks_like_jwt
from mcp_runtime.auth._principal import Principal
from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._scopes import ScopeMap
from mcp_runtime.auth._settings import OAuthSettings
from mcp_runtime.auth._static_tokens import ConfiguredTokenVerifier, hash_token


@dataclass(frozen=True)
class AuthenticatedCaller:
    principal: Principal
    access_token: AccessToken


class PrincipalUser(AuthenticatedUser):
    """The SDK's authenticated user (its session binding reads `access_token`) with our principal."""

    def __init__(self, caller: AuthenticatedCaller) -> None:
        super().__init__(caller.access_token)
        self.principal = caller.principal


VERIFIED_JWT_TTL_S = 60.0
MAX_VERIFIED_JWTS = 10_000


@dataclass(frozen=True)
class _Verified:
    until: float
    issuer: IssuerKeys
    kid: str | None
    principal: Principal
    claims: dict[str, Any]


class OAuthVerifier:
    def __init__(
        self, settings: OAuthSettings, scopes: ScopeMap, http: httpx.AsyncClient | None = None
    ) -> None:
        self.settings = settings
        self.scopes = scopes
        self._owns_http = http is None
        self.http = http or httpx.AsyncClient(timeout=settings.http_timeout_s, follow_redirects=False)
        self.issuers = {issuer.issuer: IssuerKeys(issuer, settings, self.http) for issuer in settings.issuers}
        self._jwt = JwtVerifier(settings, self.issuers)
        self.introspector = Introspector(settings, list(self.issuers.values()), self.http)
        self._verified: OrderedDict[str, _Verified] = OrderedDict()
        self._clock = time.time

    async def authenticate(self, token: str) -> tuple[Principal, dict[str, Any]]:
        """(the principal, the verified claims) of an access token, or TokenRefusedError."""
        if looks_like_jwt(token):
            return await self._authenticate_jwt(token)
        if self.introspector.enabled:
            issuer, claims = await self.introspector.introspect(token)
            return self._principal(issuer, claims), claims
        raise TokenRefusedError(
            RefusalReason.UNKNOWN_TOKEN,
            "the bearer token is neither a configured token nor a JWT access token of a trusted issuer",
        )

    async def _authenticate_jwt(self, token: str) -> tuple[Principal, dict[str, Any]]:
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        known = self._verified.get(key)
        if known is not None and known.until > now and known.issuer.holds(known.kid):
            return known.principal, known.claims
        self._verified.pop(key, None)
        verified = await self._jwt.verify(token)
        principal = self._principal(verified.issuer, verified.claims)
        exp = verified.claims.get("exp")
        until = min(float(exp), now + VERIFIED_JWT_TTL_S) if isinstance(exp, int | float) else now
        while len(self._verified) >= MAX_VERIFIED_JWTS:
            self._verified.popitem(last=False)
        self._verified[key] = _Verified(until, verified.issuer, verified.kid, principal, verified.claims)
        return principal, verified.claims

    def _principal(self, issuer: IssuerKeys, claims: dict[str, Any]) -> Principal:
        jti = claims.get("jti")
        return principal_from_claims(
            issuer.issuer, claims, self.scopes, token_id=jti if isinstance(jti, str) else None
        )

    async def aclose(self) -> None:
        if self._owns_http:
            await self.http.aclose()


class BearerVerifier:
    """Static tokens (service accounts, CI) beside OAuth access tokens; the SDK's TokenVerifier."""

    def __init__(self, static: ConfiguredTokenVerifier, oauth: OAuthVerifier | None = None) -> None:
        self.static = static
        self.oauth = oauth

    async def authenticate(self, token: str) -> AuthenticatedCaller:
        principal = self.static.principal_for_token(token)
        claims: dict[str, Any] = {}
        if principal is None:
            if self.oauth is None:
                raise TokenRefusedError(
                    RefusalReason.UNKNOWN_TOKEN, "the bearer token is not configured for any principal"
                )
            principal, claims = await self.oauth.authenticate(token)
        return AuthenticatedCaller(principal, _access_token(principal, token, claims))

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            return (await self.authenticate(token)).access_token
        except TokenRefusedError:
            return None

    async def aclose(self) -> None:
        if self.oauth is not None:
            await self.oauth.aclose()


def _access_token(principal: Principal, token: str, claims: dict[str, Any]) -> AccessToken:
    auth = principal.authentication
    exp = claims.get("exp")
    return AccessToken(
        token=hash_token(token),
        client_id=(auth.client_id if auth and auth.client_id else principal.name),
        scopes=list(principal.scopes),
        expires_at=int(exp) if isinstance(exp, int | float) else None,
        subject=auth.subject if auth else principal.name,
        claims={"iss": auth.issuer} if auth and auth.issuer else None,
    )
