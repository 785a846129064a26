"""BatchBuffer: buffered, batched durable writes for the ledger and trace recorders.

Owns when a batch is written (full, overdue, or asked to), serializing writes, and keeping a
failed batch (bounded) for the next attempt. A buffer that goes quiet is written once its
oldest record is overdue (a timer armed by the first buffered record), so a process killed
while an execution waits on a long step loses at most one flush interval of records. Must
never raise: audit records must not crash the engine that produced them.
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
        self._lock = asyncio.Lock()
        self._overdue_timer: asyncio.TimerHandle | None = None
        self._overdue_flush: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        return len(self._items)

    async def add(self, item: T, *, flush: bool = False) -> None:
        now = time.monotonic()
        if not self._items:
            self._oldest_at = now
            self._arm_overdue_timer()
        self._items.append(item)
        overdue = now - self._oldest_at >= self.flush_interval_s
        if flush or overdue or len(self._items) >= self.batch_size:
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
            except Exception:  # keep the batch for the next flush; never raise into the engine
                log.exception("%s.flush_failed", self.name, extra={"records": len(batch)})
                self._items = [*batch, *self._items][-self.batch_size * _RETAINED_BATCHES :]
