"""DurablePurge: the background loop that expires durable records older than their window.

Owns one purge pass (for each record kind with a window, delete batches of records older
than now minus the window until a batch comes back short), run every `purge_interval_ms` by
a PeriodicPass. Several control planes purging the same store only repeat deletes. Must not
choose the windows.
"""

from __future__ import annotations

import logging
from datetime import datetime

from runtime_core.lifecycle._periodic import PeriodicPass
from runtime_core.lifecycle._settings import DurableRetention
from runtime_core.storage import DurableRecordKind, DurableStore, utc_now

log = logging.getLogger("runtime_core.lifecycle")


class DurablePurge:
    def __init__(self, store: DurableStore, settings: DurableRetention) -> None:
        self.store = store
        self.settings = settings
        self._loop = PeriodicPass("lifecycle.purge", self.purge_once, settings.purge_interval_ms, log)

    @property
    def expected(self) -> bool:
        """Whether `start()` runs the loop (some durable retention window is set)."""
        return bool(self.settings.windows())

    @property
    def alive(self) -> bool:
        return self._loop.alive

    def start(self) -> None:
        if self.expected:
            self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

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
                if deleted < batch or self._loop.stopping.is_set():
                    break
            purged[kind] = total
        if any(purged.values()):
            log.info("lifecycle.durable_purged", extra={kind.value: n for kind, n in purged.items()})
        return purged
