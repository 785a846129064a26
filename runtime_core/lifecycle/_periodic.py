"""PeriodicPass: one background task that runs a pass every interval until stopped.

Owns the loop every periodic background pass shares (the hot-state sweeper, the durable
purge, the scheduler): run the pass, then wait the interval, or as long as the pass asked
(`NextPass`), or until woken (`wake()`: run the next pass now) or stopped; back off (capped
exponential, logged) while Redis or the durable store is unavailable instead of dying; log
any other failing pass (a value-free description: no input or stored value reaches the log)
and try again after the interval. Must not know what a pass does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from runtime_core.errors import StoreUnavailableError, error_description
from runtime_core.hot_state import StoreOutage


@dataclass(frozen=True)
class NextPass:
    """What a pass may return: run the next pass after `after_ms` instead of the interval."""

    after_ms: int


class PeriodicPass:
    def __init__(
        self, name: str, one_pass: Callable[[], Awaitable[object]], interval_ms: int, logger: logging.Logger
    ) -> None:
        """`name` names the task, its log events (`<name>.pass_failed`) and its outages."""
        self.name = name
        self.one_pass = one_pass
        self.interval_ms = interval_ms
        self.log = logger
        self.stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self.stopping.clear()
            self._task = asyncio.create_task(self._loop(), name=self.name)

    @property
    def alive(self) -> bool:
        """Started and its loop has not ended (readiness reads this)."""
        return self._task is not None and not self._task.done()

    def wake(self) -> None:
        """Run the next pass now (after the one running, if any) instead of waiting."""
        self._wake.set()

    async def stop(self) -> None:
        self.stopping.set()
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        outage = StoreOutage(self.name, logger=self.log)
        while not self.stopping.is_set():
            self._wake.clear()  # a wake-up from here on runs another pass after this one
            wait_ms = self.interval_ms
            try:
                result = await self.one_pass()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception as exc:  # a bug or bad data in one pass must not stop the next
                self.log.error("%s.pass_failed", self.name, extra={"error": error_description(exc)})
            else:
                outage.recovered()
                if isinstance(result, NextPass):
                    wait_ms = result.after_ms
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(wait_ms, 0) / 1000)
