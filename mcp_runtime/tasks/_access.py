"""Who may call a task method, as which snapshot, and how a refusal reads on the wire.

Owns the caller's snapshot for a task method (the same principal source and casbin check as
the tools, with each method's permission from `mcp_runtime._permissions`); failures become
JSON-RPC errors through `mcp_runtime._errors.protocol_error`. Must not look tasks up.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext

from mcp_runtime._guard import ToolGuard
from mcp_runtime._permissions import METHOD_PERMISSIONS, Permission
from runtime_core.identity import ExecutionContextSnapshot


def caller_snapshot(
    guard: ToolGuard, ctx: ServerRequestContext[Any, Any], permission: Permission | None = None
) -> ExecutionContextSnapshot:
    """Authenticate and authorize the caller of a task method (before any work); its snapshot."""
    principal = guard.authorize_request(permission or METHOD_PERMISSIONS[ctx.method], ctx)
    return principal.snapshot(context_key=f"mcp:{ctx.method}:{ctx.request_id}")
