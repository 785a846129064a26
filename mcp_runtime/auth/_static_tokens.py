"""Static bearer tokens and API keys -> configured principal (service accounts, CI, the dashboard's
token sign-in).

Owns token hashing (sha256 hex), the constant-time lookup of a presented token among the
configured digests, and the ASGI shim that accepts an `X-API-Key` header as a bearer token.
Must never log, store or return a plain token.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_runtime.auth._principal import AuthMethod, Principal, PrincipalConfig


def hash_token(token: str) -> str:
    """The sha256 hex digest stored in the configuration instead of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class HasPrincipals(Protocol):
    @property
    def principals(self) -> Mapping[str, PrincipalConfig]: ...


class ConfiguredTokenVerifier:
    """Static tokens: the configured principals, each with the sha256 digests of its tokens."""

    def __init__(self, config: HasPrincipals) -> None:
        self._principals = dict(config.principals)
        self._digests = [
            (digest, name) for name, entry in self._principals.items() for digest in entry.token_sha256
        ]

    def principal_name_for(self, token: str) -> str | None:
        presented = hash_token(token)
        match: str | None = None
        for digest, name in self._digests:  # every digest is compared: no early exit
            if hmac.compare_digest(presented, digest):
                match = name
        return match

    def principal_for_token(self, token: str) -> Principal | None:
        """The principal whose configured digest matches the token, authenticated by it."""
        name = self.principal_name_for(token)
        if name is None:
            return None
        return self._principals[name].to_principal(name, AuthMethod.STATIC_TOKEN)


class ApiKeyHeaderMiddleware:
    """Lets clients send `X-API-Key: <key>` instead of `Authorization: Bearer <key>`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
            names = {name.lower() for name, _ in headers}
            api_key = next((value for name, value in headers if name.lower() == b"x-api-key"), None)
            if api_key is not None and b"authorization" not in names:
                scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + api_key)]}
        await self.app(scope, receive, send)
