"""The workers of one process, shared by every execution it advances.

Owns `WorkerPermits`: a count of worker permits an engine worker holds only while it claims
and runs steps (never while it waits idle for something to become claimable), handed out in
the order they were asked for, when a holder should hand its permit on (someone waits and it
has held it for a time slice), and the figures a runtime instance publishes from it (in use,
free, waiting). A run's engine workers are its *potential* parallelism; the permits are the
instance's actual one, so N runs on an instance of W workers share the W between the steps
they have ready instead of each reserving its share for its whole life. Must not touch Redis
nor know about runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

# How long a worker keeps a wanted permit before handing it on: long enough that a hand-off
# (one report-only call, then a claim-only call later) is rare next to the steps it ran,
# short enough that a waiting run starts its steps promptly.
DEFAULT_TIME_SLICE_S = 0.05


@dataclass
class Permit:
    """One held permit: since when, and whether its holder should hand it on now."""

    permits: WorkerPermits
    held_since: float = field(default_factory=time.monotonic)

    def should_hand_off(self) -> bool:
        return self.permits.contended and time.monotonic() - self.held_since >= self.permits.time_slice_s


class WorkerPermits:
    """`async with permits.held():` around a round of claiming and running steps."""

    def __init__(self, count: int, *, time_slice_s: float = DEFAULT_TIME_SLICE_S) -> None:
        if count < 1:
            raise ValueError(f"A process needs at least one worker permit, not {count}.")
        self.count = count
        self.time_slice_s = time_slice_s
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
    def waiting(self) -> int:
        return self._waiting

    @property
    def contended(self) -> bool:
        """Someone waits for a permit."""
        return self._waiting > 0

    @asynccontextmanager
    async def held(self) -> AsyncIterator[Permit]:
        async with self.holding(await self.acquire()) as permit:
            yield permit

    async def acquire(self) -> Permit:
        """A permit (waiting for one in turn); give it back with `release` or `holding`."""
        self._waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1
        self._in_use += 1
        return Permit(self)

    @asynccontextmanager
    async def holding(self, permit: Permit) -> AsyncIterator[Permit]:
        """Hold an acquired permit (one handed over by whoever acquired it) until the block ends."""
        try:
            yield permit
        finally:
            self.release(permit)

    def release(self, permit: Permit) -> None:
        self._in_use -= 1
        self._semaphore.release()
