"""The schedule queries of the SQLite durable store (a part of `SqliteDurableStore`).

Owns the statements behind the schedule methods of the DurableStore contract: insert-once
(id and per-tenant name unique), tenant-scoped reads, the scheduler's listing of every
tenant's active schedules, status changes and the forward-only record of a handled tick.
Must not open connections: the store's plumbing (`_write`, `_fetch_all`) runs them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from runtime_core.storage._codec import sortable_timestamp
from runtime_core.storage._models import ScheduleFire, ScheduleRecord
from runtime_core.storage._protocol import DEFAULT_SCHEDULE_PAGE
from runtime_core.storage._sqlite_schema import SCHEDULES

_RECORD_FIRE = """
UPDATE schedules SET last_tick_at = ?, last_fired_at = ?, last_run_id = ?, last_outcome = ?,
    fire_count = fire_count + ?
WHERE tenant_id = ? AND schedule_id = ? AND (last_tick_at IS NULL OR last_tick_at < ?)
"""
_SET_STATUS = """
UPDATE schedules SET status = ?, status_changed_at = ?
WHERE tenant_id = ? AND schedule_id = ? AND status <> ?
"""


class SqliteSchedules:
    """Mixed into SqliteDurableStore, whose plumbing methods these declare."""

    async def _write(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
        raise NotImplementedError

    async def _fetch_all(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        raise NotImplementedError

    async def insert_schedule(self, record: ScheduleRecord) -> bool:
        return await self._write(SCHEDULES.insert_sql("IGNORE"), SCHEDULES.to_row(record)) == 1

    async def get_schedule(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None:
        rows = await self._fetch_all(
            SCHEDULES.select_sql("tenant_id = ? AND schedule_id = ?", "schedule_id"), (tenant_id, schedule_id)
        )
        return SCHEDULES.from_row(rows[0]) if rows else None

    async def list_schedules(
        self, tenant_id: str, *, after_name: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> list[ScheduleRecord]:
        sql = SCHEDULES.select_sql("tenant_id = ? AND name > ?", "name") + " LIMIT ?"
        rows = await self._fetch_all(sql, (tenant_id, after_name or "", limit))
        return [SCHEDULES.from_row(row) for row in rows]

    async def list_active_schedules(
        self, after: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> list[ScheduleRecord]:
        sql = SCHEDULES.select_sql("status = 'active' AND schedule_id > ?", "schedule_id") + " LIMIT ?"
        return [SCHEDULES.from_row(row) for row in await self._fetch_all(sql, (after or "", limit))]

    async def set_schedule_status(
        self, tenant_id: str, schedule_id: str, status: str, changed_at: datetime
    ) -> ScheduleRecord | None:
        at = sortable_timestamp(changed_at)
        await self._write(_SET_STATUS, (status, at, tenant_id, schedule_id, status))
        return await self.get_schedule(tenant_id, schedule_id)

    async def record_schedule_fire(self, tenant_id: str, schedule_id: str, fire: ScheduleFire) -> bool:
        tick = sortable_timestamp(fire.tick_at)
        made_run = 1 if fire.run_id else 0
        params = (
            tick,
            sortable_timestamp(fire.fired_at),
            fire.run_id,
            fire.outcome,
            made_run,
            tenant_id,
            schedule_id,
            tick,
        )
        return await self._write(_RECORD_FIRE, params) == 1

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        sql = "DELETE FROM schedules WHERE tenant_id = ? AND schedule_id = ?"
        return await self._write(sql, (tenant_id, schedule_id)) == 1
