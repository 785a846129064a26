"""The schedule queries of the MongoDB durable store (a part of `MongoDurableStore`).

Owns the queries behind the schedule methods of the DurableStore contract (the `schedules`
collection's indexes are _mongo_documents'); a stored document that does not read is
answered as an UnreadableSchedule. Must not open clients: the store's plumbing (`_guard`,
`_find_documents`) runs them.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime

from pymongo import ASCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from runtime_core.storage._models import (
    ScheduleFire,
    SchedulePage,
    ScheduleRecord,
    ScheduleRows,
    ScheduleScan,
    UnreadableSchedule,
)
from runtime_core.storage._mongo_documents import Document, from_document, to_document
from runtime_core.storage._protocol import DEFAULT_SCHEDULE_PAGE


def _document(record: ScheduleRecord) -> Document:
    return {"_id": record.schedule_id, **to_document(record)}


def _name_of(document: Document) -> str | None:
    name = document.get("name")
    return name if isinstance(name, str) else None


_ROWS: ScheduleRows[Document] = ScheduleRows(
    lambda document: from_document(ScheduleRecord, document), lambda document: str(document["_id"]), _name_of
)


class MongoSchedules:
    """Mixed into MongoDurableStore, whose plumbing these declare."""

    _db: AsyncDatabase[Document]

    def _guard(self) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def _find_documents(
        self, name: str, query: Document, sort: list[tuple[str, int]], limit: int = 0
    ) -> list[Document]:
        raise NotImplementedError

    async def insert_schedule(self, record: ScheduleRecord) -> bool:
        async with self._guard():
            try:
                await self._db["schedules"].insert_one(_document(record))
            except DuplicateKeyError:
                return False
        return True

    async def get_schedule(
        self, tenant_id: str, schedule_id: str
    ) -> ScheduleRecord | UnreadableSchedule | None:
        async with self._guard():
            found = await self._db["schedules"].find_one({"_id": schedule_id, "tenant_id": tenant_id})
        return _ROWS.one(found) if found else None

    async def list_schedules(
        self, tenant_id: str, *, after_name: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> SchedulePage:
        query = {"tenant_id": tenant_id, "name": {"$gt": after_name or ""}}
        documents = await self._find_documents("schedules", query, [("name", ASCENDING)], limit)
        return _ROWS.page(documents, limit)

    async def list_active_schedules(
        self, after: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> ScheduleScan:
        query = {"status": "active", "_id": {"$gt": after or ""}}
        documents = await self._find_documents("schedules", query, [("_id", ASCENDING)], limit)
        return _ROWS.scan(documents, limit)

    async def set_schedule_status(
        self, tenant_id: str, schedule_id: str, status: str, changed_at: datetime
    ) -> ScheduleRecord | UnreadableSchedule | None:
        async with self._guard():
            await self._db["schedules"].update_one(
                {"_id": schedule_id, "tenant_id": tenant_id, "status": {"$ne": status}},
                {"$set": {"status": status, "status_changed_at": changed_at}},
            )
        return await self.get_schedule(tenant_id, schedule_id)

    async def record_schedule_fire(self, tenant_id: str, schedule_id: str, fire: ScheduleFire) -> bool:
        newer = {"$or": [{"last_tick_at": None}, {"last_tick_at": {"$lt": fire.tick_at}}]}
        handled = {"last_fired_at": fire.fired_at, "last_outcome": fire.outcome}
        update = {
            "$set": {**handled, **({"last_run_id": fire.run_id} if fire.run_id else {})},
            "$max": {"last_tick_at": fire.tick_at},
            "$inc": {"fire_count": 1 if fire.run_id else 0},
        }
        async with self._guard():
            found = await self._db["schedules"].find_one_and_update(
                {"_id": schedule_id, "tenant_id": tenant_id, **({} if fire.late else newer)},
                update,
                return_document=ReturnDocument.AFTER,
            )
        return found is not None

    async def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        async with self._guard():
            result = await self._db["schedules"].delete_one({"_id": schedule_id, "tenant_id": tenant_id})
        return result.deleted_count == 1
