"""The MCP endpoint as an OAuth 2.1 resource server: metadata, bearer check, 401 / 403 challenges.

Owns the RFC 9728 protected resource metadata (the SDK's model and handler, served both at
`/.well-known/oauth-protected-resource` and at its path-suffixed form for the MCP path), and the
ASGI middleware in front of the MCP path: no token -> 401 `WWW-Authenticate: Bearer
resource_metadata="…"`; a refused token -> 401 with `error="invalid_token"` and a description;
a JSON-RPC request whose permission the caller's roles grant but its token's scopes do not ->
403 `error="insufficient_scope", scope="…"` (so an OAuth client can step up); otherwise the
verified caller is handed to the SDK transport as its authenticated user. Every refusal is
audited. The SDK's own RequireAuthMiddleware is not used: it names `invalid_token` even when no
token was sent, publishes one authorization server and cannot challenge per request. Must not
authorize tool calls itself: the tool guard does, after this.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_runtime.auth._audit import AccessAudit
from mcp_runtime.auth._principal import Principal
from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._scopes import ScopeMap
from mcp_runtime.auth._settings import OAuthSettings
from mcp_runtime.auth._verifier import BearerVerifier, PrincipalUser

PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"
_UNSAFE_IN_QUOTES = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")

RequiredPermission = Callable[[dict[str, Any]], str | None]
"""The permission one JSON-RPC request needs (None: nothing to check before the server)."""
RolesAllow = Callable[[Principal, str], bool]


def protected_resource_metadata(settings: OAuthSettings, scopes: ScopeMap) -> ProtectedResourceMetadata:
    # Strings, validated by the model itself: its URL settings keep an issuer's exact spelling (no
    # trailing slash added), which clients compare with the issuer's own metadata.
    return ProtectedResourceMetadata.model_validate(
        {
            "resource": settings.resource,
            "authorization_servers": [issuer.issuer for issuer in settings.issuers],
            "scopes_supported": scopes.scopes,
            "resource_name": settings.resource_name,
            "bearer_methods_supported": ["header"],
        }
    )


def protected_resource_routes(metadata: ProtectedResourceMetadata) -> list[Route]:
    """The metadata at the well-known root and at its RFC 9728 path-suffixed form (`…/mcp`)."""
    endpoint = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    suffixed = urlsplit(str(build_resource_metadata_url(metadata.resource))).path
    paths = dict.fromkeys([PROTECTED_RESOURCE_PATH, suffixed])
    return [Route(path, endpoint=endpoint, methods=["GET", "OPTIONS"]) for path in paths]


def challenge(
    metadata_url: str | None,
    *,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    """A `WWW-Authenticate: Bearer …` value (RFC 6750 §3; quoted values stripped of `"` and `\\`)."""
    attributes = {
        "error": error,
        "error_description": description,
        "scope": scope,
        "resource_metadata": metadata_url,
    }
    parts = [f'{name}="{_UNSAFE_IN_QUOTES.sub("", value)}"' for name, value in attributes.items() if value]
    return "Bearer " + ", ".join(parts) if parts else "Bearer"


@dataclass(frozen=True)
class ScopeCheck:
    """What the middleware needs to answer 403 insufficient_scope before the server runs anything."""

    required_permission: RequiredPermission
    roles_allow: RolesAllow
    scopes: ScopeMap


class ResourceServerMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        verifier: BearerVerifier,
        *,
        path: str,
        metadata_url: str | None,
        audit: AccessAudit,
        scope_check: ScopeCheck | None = None,
    ) -> None:
        self.app = app
        self.inner = AuthContextMiddleware(app)  # the SDK's get_access_token() for the tools
        self.verifier = verifier
        self.path = path.rstrip("/")
        self.metadata_url = metadata_url
        self.audit = audit
        self.scope_check = scope_check

    def _protects(self, scope: Scope) -> bool:
        path: str = scope.get("path", "")
        return scope["type"] == "http" and (path == self.path or path.startswith(self.path + "/"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._protects(scope) or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        token = _bearer(Headers(scope=scope))
        if not token:
            self.audit.refused(RefusalReason.MISSING_TOKEN, status=401, path=scope["path"])
            body = {"error": "unauthorized", "error_description": "send Authorization: Bearer <access token>"}
            await self._refuse(scope, receive, send, 401, challenge(self.metadata_url), body)
            return
        try:
            caller = await self.verifier.authenticate(token)
        except TokenRefusedError as exc:
            self.audit.refused(exc.reason, status=401, path=scope["path"], detail=exc.description)
            header = challenge(self.metadata_url, error="invalid_token", description=exc.description)
            body = {"error": "invalid_token", "error_description": exc.description}
            await self._refuse(scope, receive, send, 401, header, body)
            return
        scope = {**scope, "user": PrincipalUser(caller), "auth": AuthCredentials(caller.access_token.scopes)}
        if self.scope_check is not None and scope.get("method") == "POST":
            body_bytes, receive = await _buffered(receive)
            missing = self._missing_scope(caller.principal, body_bytes)
            if missing is not None:
                permission, needed = missing
                description = f"the token's scopes do not grant '{permission}'; request scope '{needed}'"
                self.audit.refused(
                    RefusalReason.INSUFFICIENT_SCOPE,
                    principal=caller.principal,
                    status=403,
                    path=scope["path"],
                    detail=description,
                )
                header = challenge(
                    self.metadata_url, error="insufficient_scope", description=description, scope=needed
                )
                body = {"error": "insufficient_scope", "error_description": description, "scope": needed}
                await self._refuse(scope, receive, send, 403, header, body)
                return
        await self.inner(scope, receive, send)

    def _missing_scope(self, principal: Principal, body: bytes) -> tuple[str, str] | None:
        """(permission, scope to request) of the first request the token's scopes fall short for."""
        check = self.scope_check
        if check is None or principal.scope_permissions is None:
            return None
        for message in _messages(body):
            permission = check.required_permission(message)
            if (
                permission is not None
                and not principal.scopes_permit(permission)
                and check.roles_allow(principal, permission)
            ):
                return permission, check.scopes.scope_for(permission) or permission
        return None

    @staticmethod
    async def _refuse(
        scope: Scope, receive: Receive, send: Send, status: int, header: str, body: dict[str, str]
    ) -> None:
        response = JSONResponse(body, status_code=status, headers={"WWW-Authenticate": header})
        await response(scope, receive, send)


def _bearer(headers: Headers) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _messages(body: bytes) -> Sequence[dict[str, Any]]:
    try:
        parsed = json.loads(body)
    except ValueError:
        return []  # the transport answers a parse error itself
    items = parsed if isinstance(parsed, list) else [parsed]
    return [item for item in items if isinstance(item, dict)]


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a `receive` that replays it to the app behind."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay
