"""`resources/subscribe` / `resources/unsubscribe` of the 2025-11-25 era, for `run://` URIs.

Owns the subscriptions of handshake-era connections: a subscribe is authorized (`run:read`)
and checked like `run.status` (another tenant's run answers exactly like an unknown one),
then kept per connection with the subscriber's tenant until it unsubscribes or the
connection closes; every run status event heard on Redis pub/sub sends
`notifications/resources/updated` on the connection's standalone stream for each
subscribed URI the event concerns. The SDK routes both methods only when a handler is
registered on its lowlevel server (MCPServer has no hook for them), and keeps a request's
connection private: `connection_of` is the one place that reaches it (mcp 2.3).
Must not serve the 2026-07-28 era (`subscriptions/listen`, see `_bus`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from mcp_runtime._errors import protocol_error
from mcp_runtime._guard import ToolGuard
from mcp_runtime._permissions import Permission
from mcp_runtime.notifications._uris import event_uris, parse_run_uri
from runtime_core.control_plane import ControlPlane
from runtime_core.errors import NotFoundError
from runtime_core.events import RunEvent, RunEventSubscriber

log = logging.getLogger("mcp_runtime.notifications")


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The connection a request arrived on (private in mcp 2.3's ServerSession)."""
    return ctx.session._connection  # no public accessor from a lowlevel handler


@dataclass
class _ConnectionSubscriptions:
    tenant_id: str
    uris: set[str] = field(default_factory=set)


class ResourceSubscriptions:
    def __init__(self, run_events: RunEventSubscriber, control_plane: ControlPlane, guard: ToolGuard) -> None:
        self._run_events = run_events
        self._control_plane = control_plane
        self._guard = guard
        self._connections: dict[Connection, _ConnectionSubscriptions] = {}
        self._sending: set[asyncio.Task[None]] = set()
        self._stop_hearing: Any = None

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        try:
            principal = self._guard.authorize_request(Permission.RUN_READ, ctx)
            snapshot = principal.snapshot(context_key=f"mcp:resources/subscribe:{ctx.request_id}")
            run_id = parse_run_uri(params.uri)
            if run_id is None:
                raise NotFoundError(
                    f"No subscribable resource '{params.uri}'.",
                    hint="Subscribe to run://<run id> (a SharedRunId, LocalRunId or ExecutionId).",
                )
            await self._control_plane.run_status(run_id, snapshot)
        except Exception as exc:
            raise protocol_error("resources/subscribe", exc) from exc
        self._add(connection_of(ctx), principal.tenant_id, params.uri)
        if self._stop_hearing is None:
            self._stop_hearing = self._run_events.listen(self._on_run_event)
        with contextlib.suppress(TimeoutError):  # Redis unreachable: it is heard once reconnected
            await self._run_events.wait_subscribed()
        return EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        subscriptions = self._connections.get(connection_of(ctx))
        if subscriptions is not None:
            subscriptions.uris.discard(params.uri)
        return EmptyResult()

    def _add(self, connection: Connection, tenant_id: str, uri: str) -> None:
        subscriptions = self._connections.get(connection)
        if subscriptions is None:
            subscriptions = self._connections[connection] = _ConnectionSubscriptions(tenant_id)
            connection.exit_stack.callback(self._connections.pop, connection, None)
        subscriptions.uris.add(uri)

    def _on_run_event(self, event: RunEvent) -> None:
        if event.progress:
            return
        uris = set(event_uris(event))
        for connection, subscriptions in list(self._connections.items()):
            if subscriptions.tenant_id != event.tenant_id:
                continue
            for uri in sorted(subscriptions.uris & uris):
                task = asyncio.create_task(connection.send_resource_updated(uri))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
