"""Who may call a task method, as which snapshot, and how a refusal reads on the wire.

Owns the permission of each task method (reading a task is reading its run, cancelling it is
cancelling the run, answering it is giving human input), the caller's snapshot for a task
method (the same principal source and casbin check as the tools), and the mapping of a
failure to a JSON-RPC error whose message starts with the `[code]` and says what to do.
Must not look tasks up.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST

from mcp_runtime._errors import tool_error_text
from mcp_runtime._guard import AuthenticationRequiredError, ToolGuard
from mcp_runtime._permissions import Permission
from mcp_runtime._rbac import PermissionDeniedError
from runtime_core.errors import RuntimeCoreError, StoreUnavailableError
from runtime_core.identity import ExecutionContextSnapshot

METHOD_PERMISSIONS: dict[str, Permission] = {
    "tasks/get": Permission.RUN_READ,
    "tasks/result": Permission.RUN_READ,
    "tasks/list": Permission.RUN_READ,
    "tasks/cancel": Permission.RUN_CANCEL,
    "tasks/update": Permission.RUN_INPUT,
}


def caller_snapshot(
    guard: ToolGuard, ctx: ServerRequestContext[Any, Any], permission: Permission | None = None
) -> ExecutionContextSnapshot:
    """Authenticate and authorize the caller of a task method (before any work); its snapshot."""
    principal = guard.authorize_request(permission or METHOD_PERMISSIONS[ctx.method], ctx)
    return principal.snapshot(context_key=f"mcp:{ctx.method}:{ctx.request_id}")


def protocol_error(method: str, exc: Exception) -> MCPError:
    """A task method's failure as a JSON-RPC error: `[code] what happened. Next: what to do.`"""
    text = tool_error_text(method, exc)
    if isinstance(exc, PermissionDeniedError | AuthenticationRequiredError):
        return MCPError(code=INVALID_REQUEST, message=text)
    if isinstance(exc, RuntimeCoreError) and not isinstance(exc, StoreUnavailableError):
        return MCPError(code=INVALID_PARAMS, message=text)
    return MCPError(code=INTERNAL_ERROR, message=text)
