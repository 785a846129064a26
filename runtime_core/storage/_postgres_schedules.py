"""The schedule queries of the PostgreSQL durable store (a part of `PostgresDurableStore`).

Owns the statements behind the schedule methods of the DurableStore contract: insert-once
(id and per-tenant name unique), tenant-scoped reads, the scheduler's listing of every
tenant's active schedules, status changes and the forward-only record of a handled tick,
each served by an index of migration 2. Must not open connections: the store's plumbing
(`_execute`, `_select`) runs them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runtime_core.storage._models import ScheduleFire, ScheduleRecord
from runtime_core.storage._postgres_pool import Params
from runtime_core.storage._postgres_schema import SCHEDULES, RecordTable
from runtime_core.storage._protocol import DEFAULT_SCHEDULE_PAGE

_RECORD_FIRE = """
UPDATE schedules SET last_tick_at = %s, last_fired_at = %s, last_run_id = %s, last_outcome = %s,
    fire_count = fire_count + %s
WHERE tenant_id = %s AND schedule_id = %s AND (last_tick_at IS NULL OR last_tick_at < %s)
"""
_SET_STATUS = """
UPDATE schedules SET status = %s, status_changed_at = %s
WHERE tenant_id = %s AND schedule_id = %s AND status <> %s
"""


class PostgresSchedules:
    """Mixed into PostgresDurableStore, whose plumbing methods these declare."""

    async def _execute(self, sql: str, params: Params) -> int:
        raise NotImplementedError

    async def _select(
        self,
        table: RecordTable[Any],
        where_sql: str,
        params: list[Any],
        order_by: str,
        limit: int | None = None,
    ) -> list[Any]:
        raise NotImplementedError

    async def insert_schedule(self, record: ScheduleRecord) -> bool:
        return await self._execute(SCHEDULES.insert_sql(), SCHEDULES.to_row(record)) == 1

    async def get_schedule(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None:
        found = await self._select(
            SCHEDULES, "tenant_id = %s AND schedule_id = %s", [tenant_id, schedule_id], "schedule_id"
        )
        return found[0] if found else None

    async def list_schedules(
        self, tenant_id: str, *, after_name: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> list[ScheduleRecord]:
        return await self._select(
            SCHEDULES, "tenant_id = %s AND name > %s", [tenant_id, after_name or ""], "name", limit
        )

    async def list_active_schedules(
        self, after: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> list[ScheduleRecord]:
        return await self._select(
            SCHEDULES, "status = 'active' AND schedule_id > %s", [after or ""], "schedule_id", limit
        )

    async def set_schedule_status(
        self, tenant_id: str, schedule_id: str, status: str, changed_at: datetime
    ) -> ScheduleRecord | None:
        await self._execute(_SET_STATUS, (status, changed_at, tenant_id, schedule_id, status))
        return await self.get_schedule(tenant_id, schedule_id)

    async def record_schedule_fire(self, tenant_id: str, schedule_id: str, fire: ScheduleFire) -> bool:
        made_run = 1 if fire.run_id else 0
        params = (
            fire.tick_at,
            fire.fired_at,
            fire.run_id,
            fire.outcome,
            made_run,
            tenant_id,
            schedule_id,
            fire.tick_at,
        )
        return await self._execute(_RECORD_FIRE, params) == 1

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        sql = "DELETE FROM schedules WHERE tenant_id = %s AND schedule_id = %s"
        return await self._execute(sql, (tenant_id, schedule_id)) == 1
