"""Wakes a parked run's wait when its execution is unparked, wherever that happened.

Owns the parked executions of one process's instances waiting to be unparked (resumed,
given their input, or cancelled), one run-event subscription for all of them (started by
the first parked run), and how long a parked run may go without re-reading its control
state. Pub/sub delivers at most once, so a ring only shortens the wait: a parked run still
re-reads its control state now and then (`longest_wait_s`), and a missed ring costs at most
that long. Without a subscription the wait is a plain poll with a short ceiling. Must not
read or write control state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runtime_core.events import UNPARKING_EVENTS, RunEvent, RunEventSubscriber

# With a subscription a ring wakes the run at once; without one, the poll is the only way.
_LONGEST_WAIT_RINGING_S = 5.0
_LONGEST_WAIT_POLLING_S = 0.5
_FIRST_WAIT_S = 0.02


class UnparkDoorbell:
    """`with doorbell.watching(execution_id) as rung:` wait on `rung` between control reads,
    from `first_wait_s`, doubling up to `longest_wait_s`."""

    def __init__(
        self,
        subscriber: RunEventSubscriber | None,
        *,
        first_wait_s: float = _FIRST_WAIT_S,
        longest_wait_s: float | None = None,
    ) -> None:
        self._subscriber = subscriber
        self.first_wait_s = first_wait_s
        ringing = subscriber is not None
        self.longest_wait_s = longest_wait_s or (
            _LONGEST_WAIT_RINGING_S if ringing else _LONGEST_WAIT_POLLING_S
        )
        self._watched: dict[str, asyncio.Event] = {}
        self._unsubscribe: Callable[[], None] | None = None

    def is_watching(self, execution_id: str) -> bool:
        return execution_id in self._watched

    async def wait_listening(self, timeout_s: float = 10.0) -> None:
        """Until rings can arrive (its subscription is active); at once without one."""
        if self._subscriber is not None:
            await self._subscriber.wait_subscribed(timeout_s)

    @contextmanager
    def watching(self, execution_id: str) -> Iterator[asyncio.Event]:
        if self._subscriber is not None and self._unsubscribe is None:
            self._unsubscribe = self._subscriber.listen(self._ring)
        rung = asyncio.Event()
        self._watched[execution_id] = rung
        try:
            yield rung
        finally:
            if self._watched.get(execution_id) is rung:
                del self._watched[execution_id]

    def _ring(self, event: RunEvent) -> None:
        if event.type not in UNPARKING_EVENTS or event.execution_id is None:
            return
        rung = self._watched.get(event.execution_id)
        if rung is not None:
            rung.set()

    async def aclose(self) -> None:
        """End the subscription (the pool stops); a later parked run subscribes again."""
        self._unsubscribe = None
        if self._subscriber is not None:
            await self._subscriber.aclose()
