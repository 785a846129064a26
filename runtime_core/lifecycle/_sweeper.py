"""HotStateSweeper: the background loop that retires finished runs' hot state after the grace.

Owns one sweep (claim the due members of the three schedules: ended local runs, shared runs
that ended before dispatch, executions a replay restored; archive or drop each, several at
once), run every `sweep_interval_ms` by a PeriodicPass. One failing run is logged and left to its lease (it
comes back later); it never stops the sweep. Must not decide what is finished: the archiver
does.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from runtime_core.errors import StoreUnavailableError
from runtime_core.instances import RunExecutionIndex
from runtime_core.lifecycle._archiver import ArchiveOutcome, RunArchiver
from runtime_core.lifecycle._periodic import PeriodicPass
from runtime_core.lifecycle._schedule import LifecycleSchedule
from runtime_core.lifecycle._settings import HotStateRetention
from runtime_core.queueing import SharedQueueKeys

log = logging.getLogger("runtime_core.lifecycle")

SWEEP_CONCURRENCY = 16
"""Runs one sweeper archives at once."""


class HotStateSweeper:
    def __init__(
        self,
        archiver: RunArchiver,
        schedule: LifecycleSchedule,
        index: RunExecutionIndex,
        settings: HotStateRetention,
    ) -> None:
        self.archiver = archiver
        self.schedule = schedule
        self.settings = settings
        self._ended_local_runs = index.ended_key
        self._shared_queue = SharedQueueKeys(schedule.hot_state)
        self._loop = PeriodicPass("lifecycle.sweep", self.sweep_once, settings.sweep_interval_ms, log)

    def start(self) -> None:
        if self.expected:
            self._loop.start()

    @property
    def expected(self) -> bool:
        """Whether `start()` runs the loop (hot-state retention enabled)."""
        return self.settings.enabled

    @property
    def alive(self) -> bool:
        return self._loop.alive

    async def stop(self) -> None:
        await self._loop.stop()

    async def sweep_once(self) -> Counter[str]:
        """Handle every due member once; returns how many ended in each outcome."""
        outcomes: Counter[str] = Counter()
        await self._sweep(self._ended_local_runs, self.archiver.archive_local_end, outcomes)
        for partition in self._shared_queue.partitions:
            await self._sweep(partition.ended, self.archiver.archive_shared_end, outcomes)
        await self._sweep(self.schedule.restored_key, self._drop_restored, outcomes)
        return outcomes

    async def _drop_restored(self, execution_id: str) -> ArchiveOutcome:
        dropped = await self.archiver.drop_restored(execution_id)
        await self.schedule.done(self.schedule.restored_key, execution_id)
        return ArchiveOutcome.ARCHIVED if dropped else ArchiveOutcome.NOT_FINISHED

    async def _sweep(
        self, key: str, handle: Callable[[str], Awaitable[ArchiveOutcome]], outcomes: Counter[str]
    ) -> None:
        s = self.settings
        while True:
            due = await self.schedule.claim_due(
                key, grace_ms=s.grace_ms, lease_ms=s.claim_lease_ms, limit=s.sweep_batch
            )
            outcomes.update(await self._handle_all(handle, due))
            if len(due) < s.sweep_batch or self._loop.stopping.is_set():
                return

    async def _handle_all(
        self, handle: Callable[[str], Awaitable[ArchiveOutcome]], members: list[str]
    ) -> Counter[str]:
        """Every member, SWEEP_CONCURRENCY at a time: each archiving waits on several Redis and
        durable-store round trips, and one at a time a slow link made the sweeper fall behind
        (about one run a second at 100 ms round trips, fewer than a control plane finishes).
        A store outage is raised once every member was tried (the pass backs off)."""
        gate = asyncio.Semaphore(SWEEP_CONCURRENCY)

        async def one(member: str) -> ArchiveOutcome:
            async with gate:
                return await self._handle(handle, member)

        results = await asyncio.gather(*(one(member) for member in members), return_exceptions=True)
        failures = [result for result in results if isinstance(result, BaseException)]
        if failures:
            raise failures[0]
        return Counter(result.value for result in results if isinstance(result, ArchiveOutcome))

    @staticmethod
    async def _handle(handle: Callable[[str], Awaitable[ArchiveOutcome]], member: str) -> ArchiveOutcome:
        try:
            return await handle(member)
        except StoreUnavailableError:
            raise
        except Exception:  # one broken run must not stop the sweep: it comes back after its lease
            log.exception("lifecycle.archive_failed", extra={"member": member})
            return ArchiveOutcome.WAITING
