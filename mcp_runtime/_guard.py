"""The gate in front of every tool: authenticate, authorize, capture the snapshot.

Owns the principal sources (a fixed configured principal for stdio and in-process
sessions; the verified bearer token for HTTP), the authorization call made before any work,
and the ExecutionContextSnapshot of the call. The dashboard authenticates its own way (a
session cookie) and then goes through the same gate (`admit_as`, `permits`), so a page or
an action needs exactly the permission of the tool that does the same. Must not call the
runtime.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context

from mcp_runtime._permissions import TOOL_PERMISSIONS, Permission
from mcp_runtime._principal import Principal
from mcp_runtime._rbac import Authorizer
from mcp_runtime._tokens import ConfiguredTokenVerifier
from runtime_core.identity import ExecutionContextSnapshot


class AuthenticationRequiredError(Exception):
    code = "unauthenticated"

    def __init__(self) -> None:
        super().__init__(
            "no authenticated principal for this call: send 'Authorization: Bearer <token>' "
            "(or 'X-API-Key: <token>') with a token configured for a principal"
        )


class PrincipalSource(Protocol):
    def current(self, request: ServerRequestContext[Any, Any]) -> Principal: ...


class FixedPrincipal:
    """Every call runs as one configured principal (stdio, in-process sessions)."""

    def __init__(self, principal: Principal) -> None:
        self._principal = principal

    def current(self, request: ServerRequestContext[Any, Any]) -> Principal:
        return self._principal


class BearerPrincipal:
    """The principal of the bearer token the HTTP request carried."""

    def __init__(self, verifier: ConfiguredTokenVerifier) -> None:
        self._verifier = verifier

    def current(self, request: ServerRequestContext[Any, Any]) -> Principal:
        access_token = _request_access_token(request)
        principal = self._verifier.principal_for(access_token) if access_token is not None else None
        if principal is None:
            raise AuthenticationRequiredError()
        return principal


def _request_access_token(request_context: ServerRequestContext[Any, Any]) -> AccessToken | None:
    request = request_context.request
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    if isinstance(user, AuthenticatedUser):
        return user.access_token
    return get_access_token()


class ToolGuard:
    """`admit(tool, ctx)` -> the call's snapshot, or an authentication / permission error."""

    def __init__(self, principals: PrincipalSource, authorizer: Authorizer) -> None:
        self.principals = principals
        self.authorizer = authorizer

    def admit(self, tool_name: str, ctx: Context) -> ExecutionContextSnapshot:
        principal = self.principals.current(ctx.request_context)
        return self.admit_as(principal, tool_name, context_key=f"mcp:{tool_name}:{ctx.request_id}")

    def admit_as(self, principal: Principal, tool_name: str, *, context_key: str) -> ExecutionContextSnapshot:
        """`admit` for a principal authenticated elsewhere (a dashboard session): the tool's permission
        is required, then the snapshot of the call is captured."""
        self.authorizer.require(principal, TOOL_PERMISSIONS[tool_name])
        return principal.snapshot(context_key=context_key)

    def permits(self, principal: Principal, tool_name: str) -> bool:
        """Whether `admit_as(principal, tool_name, ...)` would pass (e.g. to offer an action at all)."""
        return self.authorizer.allows(principal, TOOL_PERMISSIONS[tool_name])

    def authorize(self, permission: Permission, ctx: Context) -> Principal:
        return self.authorize_request(permission, ctx.request_context)

    def authorize_request(self, permission: Permission, request: ServerRequestContext[Any, Any]) -> Principal:
        """The same check for a protocol method handler (e.g. `tasks/get`), which has no tool Context."""
        principal = self.principals.current(request)
        self.authorizer.require(principal, permission)
        return principal
