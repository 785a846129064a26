"""The gate in front of every tool: authenticate, authorize, capture the snapshot.

Owns the principal sources (a fixed configured principal for stdio and in-process
sessions; for HTTP the principal the resource server verified from the bearer token), the
authorization call made before any work (audited when refused), and the
ExecutionContextSnapshot of the call. The dashboard authenticates its own way (a
session cookie) and then goes through the same gate (`admit_as`, `permits`), so a page or
an action needs exactly the permission of the tool that does the same. Must not call the
runtime.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context

from mcp_runtime._permissions import TOOL_PERMISSIONS, Permission
from mcp_runtime._rbac import Authorizer, InsufficientScopeError, PermissionDeniedError
from mcp_runtime.auth import AccessAudit, Principal, PrincipalUser, RefusalReason
from runtime_core.identity import ExecutionContextSnapshot


class AuthenticationRequiredError(Exception):
    code = "unauthenticated"

    def __init__(self) -> None:
        super().__init__(
            "no authenticated principal for this call: send 'Authorization: Bearer <token>' "
            "(or 'X-API-Key: <token>') with a configured token or an access token of a trusted issuer"
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
    """The principal the resource server verified from the HTTP request's bearer token."""

    def current(self, request: ServerRequestContext[Any, Any]) -> Principal:
        http_request = request.request
        user = getattr(http_request, "scope", {}).get("user") if http_request is not None else None
        if not isinstance(user, PrincipalUser):
            user = auth_context_var.get()  # requests answered outside the HTTP request's task
        if not isinstance(user, PrincipalUser):
            raise AuthenticationRequiredError()
        return user.principal


class ToolGuard:
    """`admit(tool, ctx)` -> the call's snapshot, or an authentication / permission error (audited)."""

    def __init__(
        self, principals: PrincipalSource, authorizer: Authorizer, audit: AccessAudit | None = None
    ) -> None:
        self.principals = principals
        self.authorizer = authorizer
        self.audit = audit or AccessAudit()

    def admit(self, tool_name: str, ctx: Context) -> ExecutionContextSnapshot:
        principal = self.principals.current(ctx.request_context)
        return self.admit_as(principal, tool_name, context_key=f"mcp:{tool_name}:{ctx.request_id}")

    def admit_as(self, principal: Principal, tool_name: str, *, context_key: str) -> ExecutionContextSnapshot:
        """`admit` for a principal authenticated elsewhere (a dashboard session): the tool's permission
        is required, then the snapshot of the call is captured."""
        self._require(principal, TOOL_PERMISSIONS[tool_name], tool_name)
        return principal.snapshot(context_key=context_key)

    def permits(self, principal: Principal, tool_name: str) -> bool:
        """Whether `admit_as(principal, tool_name, ...)` would pass (e.g. to offer an action at all)."""
        return self.authorizer.allows(principal, TOOL_PERMISSIONS[tool_name])

    def authorize(self, permission: Permission, ctx: Context) -> Principal:
        return self.authorize_request(permission, ctx.request_context)

    def authorize_request(self, permission: Permission, request: ServerRequestContext[Any, Any]) -> Principal:
        """The same check for a protocol method handler (e.g. `tasks/get`), which has no tool Context."""
        principal = self.principals.current(request)
        self._require(principal, permission, request.method)
        return principal

    def _require(self, principal: Principal, permission: Permission, tool: str) -> None:
        try:
            self.authorizer.require(principal, permission)
        except PermissionDeniedError as exc:
            reason = (
                RefusalReason.INSUFFICIENT_SCOPE
                if isinstance(exc, InsufficientScopeError)
                else RefusalReason.PERMISSION_DENIED
            )
            self.audit.refused(reason, principal=principal, tool=tool, detail=f"needs '{permission}'")
            raise
