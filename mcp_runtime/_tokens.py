"""Bearer tokens and API keys -> principal, for the streamable HTTP transport.

Owns token hashing (sha256 hex), the constant-time lookup of a presented token among the
configured digests, the SDK `TokenVerifier` built on it, and the ASGI shim that accepts an
`X-API-Key` header as a bearer token. Must never log, store or return a plain token.
"""

from __future__ import annotations

import hashlib
import hmac

from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_runtime._config import ServerConfig
from mcp_runtime._principal import Principal


def hash_token(token: str) -> str:
    """The sha256 hex digest stored in the configuration instead of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class ConfiguredTokenVerifier:
    """The SDK's TokenVerifier over the principals of a ServerConfig.

    The verified AccessToken names the principal in `client_id` and carries the token's
    digest (not the token) in `token`.
    """

    def __init__(self, config: ServerConfig) -> None:
        self._config = config
        self._digests = [
            (digest, name) for name, entry in config.principals.items() for digest in entry.token_sha256
        ]

    def principal_name_for(self, token: str) -> str | None:
        presented = hash_token(token)
        match: str | None = None
        for digest, name in self._digests:  # every digest is compared: no early exit
            if hmac.compare_digest(presented, digest):
                match = name
        return match

    def principal_for(self, access_token: AccessToken) -> Principal | None:
        if access_token.client_id not in self._config.principals:
            return None
        return self._config.principal(access_token.client_id)

    async def verify_token(self, token: str) -> AccessToken | None:
        name = self.principal_name_for(token)
        if name is None:
            return None
        return AccessToken(token=hash_token(token), client_id=name, scopes=[])


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
