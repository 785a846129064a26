"""PeriodicPass: one background task that runs a pass every interval until stopped.

Owns the loop both lifecycle loops share (the hot-state sweeper, the durable purge): run the
pass, wait the interval or until stopped, back off (capped exponential, logged) while Redis
or the durable store is unavailable instead of dying, and log any other failing pass and try
again at the next interval. Must not know what a pass does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import StoreOutage


class PeriodicPass:
    def __init__(
        self, name: str, one_pass: Callable[[], Awaitable[object]], interval_ms: int, logger: logging.Logger
    ) -> None:
        self.name = name
        self.one_pass = one_pass
        self.interval_ms = interval_ms
        self.log = logger
        self.stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self.stopping.clear()
            self._task = asyncio.create_task(self._loop(), name=self.name)

    @property
    def alive(self) -> bool:
        """Started and its loop has not ended (readiness reads this)."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        self.stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        outage = StoreOutage(self.name, logger=self.log)
        while not self.stopping.is_set():
            try:
                await self.one_pass()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception:  # a bug in one pass must not stop the next: log, try next interval
                self.log.exception("%s.pass_failed", self.name)
            else:
                outage.recovered()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=self.interval_ms / 1000)
