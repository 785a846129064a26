"""Run notifications over MCP: the `run://` resource, its subscriptions in both protocol eras,
and progress of a `submit` that carries a progress token.

Owns the MCP side of `runtime_core.events`: one Redis pub/sub subscriber per process hears
every run event, whichever control plane or runtime instance process changed the run, and
this package turns them into `notifications/resources/updated` for `subscriptions/listen`
streams (2026-07-28, the SDK's pluggable SubscriptionBus) and for `resources/subscribe`
(2025-11-25), tenant-checked; and into `notifications/progress` of a submit that asked
for it. Must not contain runtime behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.context import ServerMiddleware
from mcp.server.mcpserver import MCPServer
from mcp_types import SubscribeRequestParams, UnsubscribeRequestParams

from mcp_runtime._guard import ToolGuard
from mcp_runtime.notifications._bus import RunSubscriptionBus, listening_as
from mcp_runtime.notifications._legacy import ResourceSubscriptions, connection_of
from mcp_runtime.notifications._listen import LISTEN_METHOD, ListenAuthMiddleware
from mcp_runtime.notifications._progress import DEFAULT_MAX_WAIT_S, ProgressReport, RunProgress
from mcp_runtime.notifications._resource import register_run_resource
from mcp_runtime.notifications._uris import RUN_URI_TEMPLATE, event_uris, parse_run_uri, run_uri
from runtime_core.control_plane import ControlPlane
from runtime_core.events import RunEventSubscriber


@dataclass(frozen=True)
class NotificationSupport:
    """What `MCPServer(...)` takes (the bus, the middleware) and what is added once it exists."""

    bus: RunSubscriptionBus
    middleware: list[ServerMiddleware]
    subscriptions: ResourceSubscriptions
    control_plane: ControlPlane
    guard: ToolGuard

    def register(self, server: MCPServer) -> None:
        """The `run://` resource and the 2025-11-25 subscribe / unsubscribe handlers."""
        register_run_resource(server, self.control_plane, self.guard)
        # MCPServer routes neither method and has no public hook for spec methods: its lowlevel
        # server's `add_request_handler` is the SDK's way to serve them.
        lowlevel = server._lowlevel_server
        lowlevel.add_request_handler(
            "resources/subscribe", SubscribeRequestParams, self.subscriptions.subscribe
        )
        lowlevel.add_request_handler(
            "resources/unsubscribe", UnsubscribeRequestParams, self.subscriptions.unsubscribe
        )


def notification_support(
    run_events: RunEventSubscriber, control_plane: ControlPlane, guard: ToolGuard
) -> NotificationSupport:
    return NotificationSupport(
        bus=RunSubscriptionBus(run_events),
        middleware=[ListenAuthMiddleware(guard)],
        subscriptions=ResourceSubscriptions(run_events, control_plane, guard),
        control_plane=control_plane,
        guard=guard,
    )


__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Server wiring
    "notification_support",
    "NotificationSupport",
    # Subscriptions
    "RunSubscriptionBus",
    "listening_as",
    "ListenAuthMiddleware",
    "LISTEN_METHOD",
    "ResourceSubscriptions",
    "connection_of",
    # Progress
    "RunProgress",
    "ProgressReport",
    "DEFAULT_MAX_WAIT_S",
    # URIs
    "RUN_URI_TEMPLATE",
    "run_uri",
    "parse_run_uri",
    "event_uris",
]
