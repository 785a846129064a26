"""The schedule queries of the SQL durable stores (a part of `SqlDurableStore`).

Owns the statements behind the schedule methods of the DurableStore contract: insert-once
(id and per-tenant name unique), tenant-scoped reads, the scheduler's listing of every
tenant's active schedules, status changes and the record of a handled tick (forward only,
but for a waiting tick fired late), each served by an index of both schemas; a stored row
that does not read is answered as an UnreadableSchedule. Must not open connections: the
store's plumbing (`_write`, `_select_rows`) runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from runtime_core.storage._models import (
    ScheduleFire,
    SchedulePage,
    ScheduleRecord,
    ScheduleRows,
    ScheduleScan,
    UnreadableSchedule,
)
from runtime_core.storage._protocol import DEFAULT_SCHEDULE_PAGE
from runtime_core.storage._query import SqlDialect
from runtime_core.storage._sql_tables import RecordTable, RecordTables

_RECORD_FIRE = """
UPDATE schedules SET
    last_tick_at = CASE WHEN last_tick_at IS NULL OR last_tick_at < ? THEN ? ELSE last_tick_at END,
    last_fired_at = ?, last_run_id = COALESCE(?, last_run_id), last_outcome = ?,
    fire_count = fire_count + ?
WHERE tenant_id = ? AND schedule_id = ? AND (last_tick_at IS NULL OR last_tick_at < ? OR ? = 1)
"""
_SET_STATUS = """
UPDATE schedules SET status = ?, status_changed_at = ?
WHERE tenant_id = ? AND schedule_id = ? AND status <> ?
"""
_DELETE = "DELETE FROM schedules WHERE tenant_id = ? AND schedule_id = ?"


class SqlSchedules:
    """Mixed into SqlDurableStore, whose plumbing these declare."""

    _dialect: ClassVar[SqlDialect]
    _tables: ClassVar[RecordTables]

    async def _write(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
        raise NotImplementedError

    async def _select_rows(
        self, table: RecordTable[Any], where: str, params: list[Any], order_by: str, limit: int | None = None
    ) -> list[Any]:
        raise NotImplementedError

    def _rows(self) -> ScheduleRows[Any]:
        return ScheduleRows(
            self._tables.schedules.from_row, lambda row: str(row["schedule_id"]), lambda row: str(row["name"])
        )

    async def insert_schedule(self, record: ScheduleRecord) -> bool:
        schedules = self._tables.schedules
        return await self._write(schedules.insert_sql(), schedules.to_row(record)) == 1

    async def get_schedule(
        self, tenant_id: str, schedule_id: str
    ) -> ScheduleRecord | UnreadableSchedule | None:
        where = self._dialect.spell("tenant_id = ? AND schedule_id = ?")
        found = await self._select_rows(
            self._tables.schedules, where, [tenant_id, schedule_id], "schedule_id"
        )
        return self._rows().one(found[0]) if found else None

    async def list_schedules(
        self, tenant_id: str, *, after_name: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> SchedulePage:
        where = self._dialect.spell("tenant_id = ? AND name > ?")
        rows = await self._select_rows(
            self._tables.schedules, where, [tenant_id, after_name or ""], "name", limit
        )
        return self._rows().page(rows, limit)

    async def list_active_schedules(
        self, after: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> ScheduleScan:
        where = self._dialect.spell("status = 'active' AND schedule_id > ?")
        rows = await self._select_rows(self._tables.schedules, where, [after or ""], "schedule_id", limit)
        return self._rows().scan(rows, limit)

    async def set_schedule_status(
        self, tenant_id: str, schedule_id: str, status: str, changed_at: datetime
    ) -> ScheduleRecord | UnreadableSchedule | None:
        params = (status, self._dialect.timestamp(changed_at), tenant_id, schedule_id, status)
        await self._write(self._dialect.spell(_SET_STATUS), params)
        return await self.get_schedule(tenant_id, schedule_id)

    async def record_schedule_fire(self, tenant_id: str, schedule_id: str, fire: ScheduleFire) -> bool:
        tick = self._dialect.timestamp(fire.tick_at)
        made_run = 1 if fire.run_id else 0
        params = (
            tick,
            tick,
            self._dialect.timestamp(fire.fired_at),
            fire.run_id,
            fire.outcome,
            made_run,
            tenant_id,
            schedule_id,
            tick,
            1 if fire.late else 0,
        )
        return await self._write(self._dialect.spell(_RECORD_FIRE), params) == 1

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        return await self._write(self._dialect.spell(_DELETE), (tenant_id, schedule_id)) == 1
