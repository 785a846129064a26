"""The workers of one process, shared by every execution it advances.

Owns `WorkerPermits`: a count of worker permits an engine worker holds only while it claims
and runs steps (never while it waits idle for something to become claimable), handed out in
the order they were asked for, and the figures a runtime instance publishes from it (in use,
free, waiting). A run's engine workers are its *potential* parallelism; the permits are the
instance's actual one, so N runs on an instance of W workers share the W between the steps
they have ready instead of each reserving its share for its whole life. Must not touch Redis
nor know about runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class WorkerPermits:
    """`async with permits.held():` around a round of claiming and running steps."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"A process needs at least one worker permit, not {count}.")
        self.count = count
        self._semaphore = asyncio.Semaphore(count)
        self._in_use = 0
        self._waiting = 0

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def free(self) -> int:
        return self.count - self._in_use

    @property
    def contended(self) -> bool:
        """Someone waits for a permit: a worker on a long streak should hand its permit on."""
        return self._waiting > 0

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        self._waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1
        self._in_use += 1
        try:
            yield
        finally:
            self._in_use -= 1
            self._semaphore.release()
