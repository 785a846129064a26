"""ListenAuthMiddleware: `subscriptions/listen` opened only by an authorized principal.

Owns the check in front of the SDK's ListenHandler (2026-07-28): the caller must hold
`run:read`; the stream then runs inside `listening_as(<caller's tenant>)`, so the bus
registers it for that tenant's runs only. A refusal is a JSON-RPC error starting with its
`[code]`. Must not touch other methods.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_runtime._errors import protocol_error
from mcp_runtime._guard import AuthenticationRequiredError, ToolGuard
from mcp_runtime._permissions import Permission
from mcp_runtime._rbac import PermissionDeniedError
from mcp_runtime.notifications._bus import listening_as

LISTEN_METHOD = "subscriptions/listen"


class ListenAuthMiddleware:
    """A `Server.middleware` entry: `(ctx, call_next) -> result`."""

    def __init__(self, guard: ToolGuard) -> None:
        self._guard = guard

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != LISTEN_METHOD:
            return await call_next(ctx)
        try:
            principal = self._guard.authorize_request(Permission.RUN_READ, ctx)
        except (AuthenticationRequiredError, PermissionDeniedError) as exc:
            raise protocol_error(LISTEN_METHOD, exc) from exc
        with listening_as(principal.tenant_id):
            return await call_next(ctx)
