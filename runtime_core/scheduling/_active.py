"""ActiveSchedules: a scheduler's copy of every tenant's active schedules, read again only
when they changed.

Owns the schedules-changed version in Redis (`{prefix}sched:version`: a random token that
every create / pause / resume / delete writes once the durable store has the change, created
by the first scheduler that finds none, e.g. after Redis lost its dataset) and the copy of
the active schedules read from the durable store (a row that does not read is logged by id,
never its values, and skipped). The copy is read again when the version differs from the one
it was read at, or after `refresh_interval_ms` (a change whose version write failed, an
operator's edit of the store). Every control plane reads the one version, so each sees every
change. Must not plan or fire ticks.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from runtime_core.hot_state import HotState
from runtime_core.storage import DurableStore, ScheduleRecord

log = logging.getLogger("runtime_core.scheduling")


def _new_version() -> str:
    return secrets.token_hex(8)


class ActiveSchedules:
    def __init__(self, hot_state: HotState, store: DurableStore, *, refresh_interval_ms: int) -> None:
        self.key = hot_state.key("sched", "version")
        self._redis = hot_state.redis
        self._store = store
        self._refresh_interval_s = refresh_interval_ms / 1000
        self.records: tuple[ScheduleRecord, ...] = ()
        self._version: str | None = None
        self._read_at = float("-inf")

    def queue_version(self, pipe: Any) -> None:
        """Queue the read of the version on a pass's pipeline, creating it when there is none
        (two replies: the create's, then the version)."""
        pipe.set(self.key, _new_version(), nx=True)
        pipe.get(self.key)

    def stale(self, version: str) -> bool:
        """Whether the copy must be read again, given the version Redis holds now."""
        return version != self._version or time.monotonic() - self._read_at >= self._refresh_interval_s

    async def refresh(self, version: str) -> tuple[ScheduleRecord, ...]:
        """Read the active schedules again; the copy is then the one of `version` (read before
        the store, so a change made meanwhile makes it stale at once)."""
        records: list[ScheduleRecord] = []
        after: str | None = None
        while True:
            scan = await self._store.list_active_schedules(after=after)
            for unreadable in scan.unreadable:
                log.warning(
                    "scheduler.schedule_unreadable",
                    extra={"schedule_id": unreadable.schedule_id, "error": unreadable.problem},
                )
            records.extend(scan.records)
            if scan.last_id is None:
                break
            after = scan.last_id
        self.records, self._version, self._read_at = tuple(records), version, time.monotonic()
        return self.records

    async def changed(self) -> None:
        """A schedule was created, paused, resumed or deleted (the durable store has it): every
        scheduler reads the active schedules again at its next pass."""
        await self._redis.set(self.key, _new_version())
