"""BusyListing: a registry listing that showed no free run slot, kept until capacity is freed.

Owns reusing such a listing across pump cycles, so a `queue.drain` (or a background cycle)
that finds every instance busy again costs no registry read: it is forgotten as soon as any
runtime instance announces freed capacity (the capacity channel: a run ended, an instance
joined), when the subscription (re)starts (announcements may have been missed), and after
`max_age_s` in any case. A listing that shows free slots is never kept (its slots are taken
by dispatches). Must not read Redis or decide admissions.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from runtime_core.events import RunEventSubscriber
from runtime_core.instances import InstanceEntry

BUSY_LISTING_MAX_AGE_S = 1.0


class BusyListing:
    def __init__(self, signals: RunEventSubscriber, *, max_age_s: float = BUSY_LISTING_MAX_AGE_S) -> None:
        self.signals = signals
        self.max_age_s = max_age_s
        self.generation = 0  # listings forgotten so far: a read that started before one is stale
        self._entries: list[InstanceEntry] | None = None
        self._kept_at = 0.0
        self._unsubscribe: Callable[[], None] | None = None

    def get(self) -> list[InstanceEntry] | None:
        """The kept listing, while it may still be trusted."""
        if self._entries is None or not self.signals.subscribed.is_set():
            return None
        if time.monotonic() - self._kept_at > self.max_age_s:
            self._entries = None
        return self._entries

    def keep(self, entries: list[InstanceEntry], generation: int) -> None:
        """Keep a busy listing whose read started at `generation` (nothing was freed since)."""
        if self._unsubscribe is None:  # from the first busy listing on, hear freed capacity
            self._unsubscribe = self.signals.on_capacity(lambda _instance_id: self.forget(), gap=self.forget)
        if generation == self.generation and self.signals.subscribed.is_set():
            self._entries, self._kept_at = entries, time.monotonic()

    def forget(self) -> None:
        self.generation += 1
        self._entries = None
