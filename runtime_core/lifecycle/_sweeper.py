"""HotStateSweeper: the background loop that retires finished runs' hot state after the grace.

Owns one sweep (claim the due members of the three schedules: ended local runs, shared runs
that ended before dispatch, executions a replay restored; archive or drop each) and the loop
that sweeps every `sweep_interval_ms`, backing off while Redis or the durable store is
unavailable instead of dying. One failing run is logged and left to its lease (it comes back
later); it never stops the sweep. Must not decide what is finished: the archiver does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import StoreOutage
from runtime_core.instances import RunExecutionIndex
from runtime_core.lifecycle._archiver import ArchiveOutcome, RunArchiver
from runtime_core.lifecycle._schedule import LifecycleSchedule
from runtime_core.lifecycle._settings import HotStateRetention
from runtime_core.queueing import SharedQueueKeys

log = logging.getLogger("runtime_core.lifecycle")


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
        self._ended_shared_runs = SharedQueueKeys(schedule.hot_state).ended
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.settings.enabled:
            self._stop.clear()
            self._task = asyncio.create_task(self._loop(), name="hot-state-sweeper")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def sweep_once(self) -> Counter[str]:
        """Handle every due member once; returns how many ended in each outcome."""
        outcomes: Counter[str] = Counter()
        await self._sweep(self._ended_local_runs, self.archiver.archive_local_end, outcomes)
        await self._sweep(self._ended_shared_runs, self.archiver.archive_shared_end, outcomes)
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
            for member in due:
                outcomes[(await self._handle(handle, member)).value] += 1
            if len(due) < s.sweep_batch or self._stop.is_set():
                return

    @staticmethod
    async def _handle(handle: Callable[[str], Awaitable[ArchiveOutcome]], member: str) -> ArchiveOutcome:
        try:
            return await handle(member)
        except StoreUnavailableError:
            raise
        except Exception:  # one broken run must not stop the sweep: it comes back after its lease
            log.exception("lifecycle.archive_failed", extra={"member": member})
            return ArchiveOutcome.WAITING

    async def _loop(self) -> None:
        outage = StoreOutage("lifecycle.sweep", logger=log)
        while not self._stop.is_set():
            try:
                await self.sweep_once()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception:  # a bug in one sweep must not stop the next: log, try next interval
                log.exception("lifecycle.sweep_failed")
            else:
                outage.recovered()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.settings.sweep_interval_ms / 1000)
