"""DurablePurge: the background loop that expires durable records older than their window.

Owns one purge pass (for each record kind with a window, delete batches of records older
than now minus the window until a batch comes back short) and the loop that runs it every
`purge_interval_ms`, backing off while the durable store is unavailable. Several control
planes purging the same store only repeat deletes. Must not choose the windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import StoreOutage
from runtime_core.lifecycle._settings import DurableRetention
from runtime_core.storage import DurableRecordKind, DurableStore, utc_now

log = logging.getLogger("runtime_core.lifecycle")


class DurablePurge:
    def __init__(self, store: DurableStore, settings: DurableRetention) -> None:
        self.store = store
        self.settings = settings
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.settings.windows():
            self._stop.clear()
            self._task = asyncio.create_task(self._loop(), name="durable-retention-purge")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def purge_once(self, now: datetime | None = None) -> dict[DurableRecordKind, int]:
        """Delete every record older than its kind's window at `now`; returns the counts."""
        now = now or utc_now()
        batch = self.settings.purge_batch
        purged: dict[DurableRecordKind, int] = {}
        for kind, window in self.settings.windows().items():
            total = 0
            while True:
                deleted = await self.store.purge(kind, now - window, batch)
                total += deleted
                if deleted < batch or self._stop.is_set():
                    break
            purged[kind] = total
        if any(purged.values()):
            log.info("lifecycle.durable_purged", extra={kind.value: n for kind, n in purged.items()})
        return purged

    async def _loop(self) -> None:
        outage = StoreOutage("lifecycle.purge", logger=log)
        while not self._stop.is_set():
            try:
                await self.purge_once()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception:  # a bug in one pass must not stop retention: log, try next interval
                log.exception("lifecycle.purge_failed")
            else:
                outage.recovered()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.settings.purge_interval_ms / 1000)
