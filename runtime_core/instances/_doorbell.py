"""Wakes a parked run's wait when its execution is unparked, wherever that happened.

Owns the parked executions of one process's instances waiting to be unparked (resumed,
given their input, or cancelled), one run-event subscription for all of them (started with
the first instance), and how long a parked run may go without re-reading its control state.
Pub/sub delivers at most once: every watched run is rung whenever the subscription becomes
active (at first and after each reconnect: rings may have been lost meanwhile), and a parked
run still re-reads its control state now and then (from `first_wait_s`, doubling up to
`longest_wait_s`) in case an unparking event never left its publisher (a process that died
between the control change and the publication). Without a subscription the wait is a plain
poll starting short with a short ceiling.
Must not read or write control state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runtime_core.events import UNPARKING_EVENTS, RunEvent, RunEventSubscriber

# With a subscription a ring wakes the run at once and re-reads are only a safety net against
# an event its publisher never sent (so they can be rare: thousands of runs may be parked);
# without one, the poll is the only way to notice.
_RINGING_WAITS_S = (10.0, 120.0)
_POLLING_WAITS_S = (0.02, 0.5)


class UnparkDoorbell:
    """`with doorbell.watching(execution_id) as rung:` wait on `rung` between control reads,
    from `first_wait_s`, doubling up to `longest_wait_s`."""

    def __init__(
        self,
        subscriber: RunEventSubscriber | None,
        *,
        first_wait_s: float | None = None,
        longest_wait_s: float | None = None,
    ) -> None:
        self._subscriber = subscriber
        first, longest = _RINGING_WAITS_S if subscriber is not None else _POLLING_WAITS_S
        self.first_wait_s = first_wait_s or first
        self.longest_wait_s = longest_wait_s or longest
        self._watched: dict[str, asyncio.Event] = {}
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def subscriber(self) -> RunEventSubscriber | None:
        """The process's run-event subscription the doorbell listens on (other listeners of the
        instance share it: one connection per process)."""
        return self._subscriber

    def listen(self) -> None:
        """Start the subscription (idempotent; an instance calls it when it starts)."""
        if self._subscriber is not None and self._unsubscribe is None:
            self._unsubscribe = self._subscriber.listen(
                self._ring, gap=self._ring_all, types=UNPARKING_EVENTS
            )

    def is_watching(self, execution_id: str) -> bool:
        return execution_id in self._watched

    async def wait_listening(self, timeout_s: float = 10.0) -> None:
        """Until rings can arrive (its subscription is active); at once without one."""
        if self._subscriber is not None:
            await self._subscriber.wait_subscribed(timeout_s)

    @contextmanager
    def watching(self, execution_id: str) -> Iterator[asyncio.Event]:
        self.listen()
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

    def _ring_all(self) -> None:
        """Rings may have been missed (the subscription just became active): re-read them all."""
        for rung in self._watched.values():
            rung.set()

    async def aclose(self) -> None:
        """End the subscription (the pool stops); a later instance subscribes again."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._subscriber is not None:
            await self._subscriber.aclose()
