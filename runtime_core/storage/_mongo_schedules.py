"""The schedule queries of the MongoDB durable store (a part of `MongoDurableStore`).

Owns the queries behind the schedule methods of the DurableStore contract (the `schedules`
collection's indexes are _mongo_documents'). Must not open clients:
the store's plumbing (`_guard`, `_find`) runs them.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime

from pymongo import ASCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from runtime_core.storage._models import ScheduleFire, ScheduleRecord, ScheduleScan, scan_schedules
from runtime_core.storage._mongo_documents import Document, RecordT, from_document, to_document
from runtime_core.storage._protocol import DEFAULT_SCHEDULE_PAGE


def _document(record: ScheduleRecord) -> Document:
    return {"_id": record.schedule_id, **to_document(record)}


class MongoSchedules:
    """Mixed into MongoDurableStore, whose plumbing these declare."""

    _db: AsyncDatabase[Document]

    def _guard(self) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def _find(
        self, model: type[RecordT], name: str, query: Document, sort: list[tuple[str, int]], limit: int = 0
    ) -> list[RecordT]:
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

    async def get_schedule(self, tenant_id: str, schedule_id: str) -> ScheduleRecord | None:
        async with self._guard():
            found = await self._db["schedules"].find_one({"_id": schedule_id, "tenant_id": tenant_id})
        return from_document(ScheduleRecord, found) if found else None

    async def list_schedules(
        self, tenant_id: str, *, after_name: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> list[ScheduleRecord]:
        query = {"tenant_id": tenant_id, "name": {"$gt": after_name or ""}}
        return await self._find(ScheduleRecord, "schedules", query, [("name", ASCENDING)], limit)

    async def list_active_schedules(
        self, after: str | None = None, limit: int = DEFAULT_SCHEDULE_PAGE
    ) -> ScheduleScan:
        query = {"status": "active", "_id": {"$gt": after or ""}}
        documents = await self._find_documents("schedules", query, [("_id", ASCENDING)], limit)
        return scan_schedules(
            documents,
            limit,
            lambda document: from_document(ScheduleRecord, document),
            lambda document: document["_id"],
        )

    async def set_schedule_status(
        self, tenant_id: str, schedule_id: str, status: str, changed_at: datetime
    ) -> ScheduleRecord | None:
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
