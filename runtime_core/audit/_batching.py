"""BatchBuffer: buffered, batched durable writes for the ledger and trace recorders.

Owns when a batch is written (full, overdue, or asked to), serializing writes, and keeping a
failed batch (bounded) for the next attempt, also when the caller that was writing it is
cancelled. A buffer that goes quiet is written once its oldest record is overdue (a timer
armed by the first buffered record, and again after a failed write), so a process killed
while an execution waits on a long step loses at most one flush interval of records, and
records kept through a store outage are written once it answers again. Must never raise:
audit records must not crash the engine that produced them, nor make it wait on a store
that does not answer (only a record that asks to be flushed waits for its write).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger("runtime_core.audit")

T = TypeVar("T")
DEFAULT_BATCH_SIZE = 256
DEFAULT_FLUSH_INTERVAL_S = 1.0
_RETAINED_BATCHES = 16


class BatchBuffer(Generic[T]):
    def __init__(
        self,
        name: str,
        write: Callable[[list[T]], Awaitable[None]],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
    ) -> None:
        self.name = name
        self._write = write
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self._items: list[T] = []
        self._oldest_at = 0.0
        self._retry_at = 0.0  # after a failed write: no add() starts another before this
        self._lock = asyncio.Lock()
        self._overdue_timer: asyncio.TimerHandle | None = None
        self._overdue_flush: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        return len(self._items)

    async def add(self, item: T, *, flush: bool = False) -> None:
        """Buffer `item`; write the batch now when asked (`flush`), full or overdue. Without
        `flush`, the caller never waits for a write already under way, nor retries a write that
        just failed (the overdue timer does): an unreachable store costs the caller nothing."""
        now = time.monotonic()
        if not self._items:
            self._oldest_at = now
        self._items.append(item)
        self._arm_overdue_timer()
        if flush:
            await self.flush()
            return
        due = now - self._oldest_at >= self.flush_interval_s or len(self._items) >= self.batch_size
        if due and not self._lock.locked() and now >= self._retry_at:
            await self.flush()

    def _arm_overdue_timer(self) -> None:
        if self._overdue_timer is None:
            loop = asyncio.get_running_loop()
            self._overdue_timer = loop.call_later(self.flush_interval_s, self._flush_overdue)

    def _flush_overdue(self) -> None:
        self._overdue_timer = None
        self._overdue_flush = asyncio.ensure_future(self.flush())

    async def flush(self) -> None:
        async with self._lock:
            batch, self._items = self._items, []
            if not batch:
                return
            try:
                await self._write(batch)
            except BaseException as exc:
                # Keep the batch for the next flush (a repeated write is harmless: stores ignore
                # records they hold). A cancelled caller (a client that went away) must not take
                # the batch, every other caller's records with it.
                self._items = [*batch, *self._items][-self.batch_size * _RETAINED_BATCHES :]
                if not isinstance(exc, Exception):
                    raise
                log.exception("%s.flush_failed", self.name, extra={"records": len(batch)})
                self._retry_at = time.monotonic() + self.flush_interval_s
            else:
                self._retry_at = 0.0
                self._oldest_at = time.monotonic()
            finally:
                if self._items:
                    self._arm_overdue_timer()
