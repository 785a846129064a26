"""RunEventSubscriber: this process's one Redis pub/sub listener of run events.

Owns the subscription to the run-event channel and the capacity channel (started with the
first listener, one connection whatever the number of listeners), decoding each message's
batch and handing every event to the registered listeners (those that name the event types
they take get only those, and events no listener takes are not decoded), handing the id of an
instance that freed capacity to the capacity listeners, and reconnecting with back-off when
Redis goes away. Pub/sub delivers at most once: events published while the connection was
down are lost, so listeners that must not miss an end also re-read the run now and then;
a listener may also register a `gap` callback, called each time the subscription becomes
active (the first time and after every reconnect), when it should re-read what it waits on.
Listeners are synchronous and must not block.
Must not filter by tenant: listeners do, from each event's `tenant_id`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Collection
from typing import Any

from pydantic import ValidationError
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from runtime_core.errors import StoreUnavailableError
from runtime_core.events._keys import RunEventKeys
from runtime_core.events._models import RunEvent, RunEventType
from runtime_core.hot_state import REPLY_DEADLINE_S, HotState

log = logging.getLogger("runtime_core.events")

RunEventListener = Callable[[RunEvent], None]
GapListener = Callable[[], None]
CapacityListener = Callable[[str], None]
_POLL_TIMEOUT_S = 1.0
_CLOSE_GRACE_S = 1.0
_LOST = (StoreUnavailableError, RedisError, OSError)


class RunEventSubscriber:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self.keys = RunEventKeys(hot_state)
        self._listeners: dict[object, RunEventListener] = {}
        self._gap_listeners: dict[object, GapListener] = {}
        self._capacity_listeners: dict[object, CapacityListener] = {}
        self._types: dict[object, frozenset[str] | None] = {}  # listener -> the event types it takes
        self._wanted: frozenset[str] | None = frozenset()  # what any listener takes (None: all)
        self._task: asyncio.Task[None] | None = None
        self._pubsub: PubSub | None = None  # the live subscription's, while there is one
        self._closing = False
        self.subscribed = asyncio.Event()

    def listen(
        self,
        listener: RunEventListener,
        *,
        gap: GapListener | None = None,
        types: Collection[RunEventType] | None = None,
    ) -> Callable[[], None]:
        """Register `listener` (starting the subscription); returns an idempotent unsubscribe.

        `gap`: called whenever the subscription becomes active, since events published before
        that (or while it was reconnecting) never reached `listener`. `types`: the only event
        types it is handed (None: all); while every listener names its types, the events of
        other types are not even decoded into models (a runtime instance listens for a few
        rare types while its runs' step progress streams past: thousands of events a second)."""
        token = object()
        self._listeners[token] = listener
        self._types[token] = frozenset(t.value for t in types) if types is not None else None
        self._wanted = _wanted(self._types.values())
        if gap is not None:
            self._gap_listeners[token] = gap
        return self._subscribed(token)

    def on_capacity(
        self, listener: CapacityListener, *, gap: GapListener | None = None
    ) -> Callable[[], None]:
        """Register `listener` for capacity freed on any runtime instance (called with its id;
        at most once per publication, none while disconnected); returns an unsubscribe.
        `gap`: as for `listen`."""
        token = object()
        self._capacity_listeners[token] = listener
        if gap is not None:
            self._gap_listeners[token] = gap
        return self._subscribed(token)

    def _subscribed(self, token: object) -> Callable[[], None]:
        """Start the subscription if needed; the unsubscribe of `token`'s listeners."""
        if self._task is None or self._task.done():
            self._closing = False
            self._task = asyncio.create_task(self._run(), name="run-events-subscriber")

        def unsubscribe() -> None:
            for listeners in (self._listeners, self._gap_listeners, self._capacity_listeners):
                listeners.pop(token, None)
            if self._types.pop(token, ()) != ():
                self._wanted = _wanted(self._types.values())

        return unsubscribe

    async def wait_subscribed(self, timeout_s: float = 10.0) -> None:
        """Until the channel subscription is active (events published from now on arrive)."""
        await asyncio.wait_for(self.subscribed.wait(), timeout_s)

    async def aclose(self) -> None:
        """Stop listening. A cancellation that lands while redis-py reads a pub/sub reply can be
        swallowed (the read then waits for a message that may never come), so a subscription
        still running after a grace period has its connection closed under it."""
        task, self._task = self._task, None
        if task is None:
            return
        self._closing = True
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_GRACE_S)
        if not done and self._pubsub is not None:
            with contextlib.suppress(*_LOST):
                await self._pubsub.aclose()
        with contextlib.suppress(asyncio.CancelledError, *_LOST):
            await task

    def deliver(self, event: RunEvent) -> None:
        for token, listener in list(self._listeners.items()):
            types = self._types.get(token)
            if types is not None and event.type.value not in types:
                continue
            try:
                listener(event)
            except Exception:  # fan-out boundary: one broken listener must not starve the others
                log.exception("run_events.listener_failed", extra={"event_id": event.event_id})

    async def _run(self) -> None:
        delay = 0.05
        while not self._closing:
            try:
                await self._listen_once()
            except _LOST as exc:
                log.warning("run_events.subscription_lost", extra={"error": str(exc)})
            except Exception:  # the listener must outlive any failure: log it, back off, resubscribe
                log.exception("run_events.subscription_failed")
            if self.subscribed.is_set():  # it had worked: reconnect quickly first
                delay = 0.05
            self.subscribed.clear()
            await asyncio.sleep(delay)  # back off before reconnecting to an unreachable Redis
            delay = min(2.0, delay * 2)

    async def _listen_once(self) -> None:
        await self.hot_state.ping()  # a cluster client learns its slots from its first command
        pubsub = self._pubsub = self.hot_state.redis.pubsub()
        try:
            async with asyncio.timeout(REPLY_DEADLINE_S):  # its socket has no reply timeout of its own
                await pubsub.subscribe(self.keys.channel, self.keys.capacity_channel)
            self.subscribed.set()
            self._announce_gap()
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=_POLL_TIMEOUT_S)
                if message is not None:
                    self._dispatch(message)
        finally:
            self._pubsub = None
            with contextlib.suppress(*_LOST):
                await pubsub.aclose()

    def _announce_gap(self) -> None:
        for gap in list(self._gap_listeners.values()):
            try:
                gap()
            except Exception:  # fan-out boundary, as in `deliver`
                log.exception("run_events.gap_listener_failed")

    def _dispatch(self, message: dict[str, Any]) -> None:
        if message.get("channel") == self.keys.capacity_channel:
            self._capacity_freed(str(message["data"]))
            return
        wanted = self._wanted
        try:
            events = [
                RunEvent.model_validate(raw)
                for raw in json.loads(message["data"])
                if wanted is None or not isinstance(raw, dict) or raw.get("type") in wanted
            ]
        except (ValueError, TypeError, ValidationError):
            log.warning("run_events.bad_message", extra={"channel": message.get("channel")})
            return
        for event in events:
            self.deliver(event)

    def _capacity_freed(self, runtime_instance_id: str) -> None:
        for listener in list(self._capacity_listeners.values()):
            try:
                listener(runtime_instance_id)
            except Exception:  # fan-out boundary, as in `deliver`
                log.exception("run_events.capacity_listener_failed")


def _wanted(types: Collection[frozenset[str] | None]) -> frozenset[str] | None:
    """The event types some listener takes; None when one of them takes every type."""
    wanted: set[str] = set()
    for listener_types in types:
        if listener_types is None:
            return None
        wanted |= listener_types
    return frozenset(wanted)
