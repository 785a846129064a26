"""RunSubscriptionBus: the SDK's `SubscriptionBus` for `subscriptions/listen`, fed by Redis.

Owns the `subscriptions/listen` streams of this process (2026-07-28): each listener is
registered with the tenant of the principal that opened its stream (`listening_as`, set by
`ListenAuthMiddleware` around the SDK's ListenHandler), and every run status event heard on
Redis pub/sub (`runtime_core.events`, published by whichever process changed the run)
becomes `notifications/resources/updated` for `run://<id>` - delivered only to listeners of
the run's own tenant, so another tenant's run never fires (exactly like an unknown URI).
Events the SDK publishes itself (list changes) fan out locally. Step progress is not a
resource change here. Must not authorize: the middleware does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import anyio.lowlevel
from mcp.server.subscriptions import ResourceUpdated, ServerEvent

from mcp_runtime.notifications._uris import event_uris
from runtime_core.events import RunEvent, RunEventSubscriber

log = logging.getLogger("mcp_runtime.notifications")

_listening_tenant: ContextVar[str | None] = ContextVar("mcp_runtime_listening_tenant", default=None)
Listener = Callable[[ServerEvent], None]


@contextlib.contextmanager
def listening_as(tenant_id: str) -> Iterator[None]:
    """Streams opened inside this block hear the runs of `tenant_id`."""
    token = _listening_tenant.set(tenant_id)
    try:
        yield
    finally:
        _listening_tenant.reset(token)


class RunSubscriptionBus:
    def __init__(self, run_events: RunEventSubscriber) -> None:
        self._run_events = run_events
        self._listeners: dict[object, tuple[str | None, Listener]] = {}
        self._stop_hearing: Callable[[], None] | None = None

    async def publish(self, event: ServerEvent) -> None:
        for _, listener in list(self._listeners.values()):
            _call(listener, event)
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (_listening_tenant.get(), listener)
        if self._stop_hearing is None:
            self._stop_hearing = self._run_events.listen(self._on_run_event)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def _on_run_event(self, event: RunEvent) -> None:
        if event.progress:
            return
        updates = [ResourceUpdated(uri=uri) for uri in event_uris(event)]
        for tenant_id, listener in list(self._listeners.values()):
            if tenant_id == event.tenant_id:
                for update in updates:
                    _call(listener, update)


def _call(listener: Listener, event: ServerEvent) -> None:
    try:
        listener(event)
    except Exception:  # fan-out boundary: one broken stream must not starve the others
        log.exception("subscription.listener_failed")
