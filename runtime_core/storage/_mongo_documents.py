"""How the MongoDB durable store lays records out: documents, filters and indexes.

Owns the record <-> document mapping (JSON fields stay nested documents, datetimes are BSON
dates, `_id` is the store's), the tenant-scoped filters (the run listing's with its cursor),
the recognition of duplicate-key batch errors and every collection's indexes (created on
open). Must not open clients or run queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel
from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.errors import BulkWriteError

from runtime_core.storage._models import RunRecordQuery

_DUPLICATE_KEY = 11000

RecordT = TypeVar("RecordT", bound=BaseModel)
Document = dict[str, Any]

INDEXES: dict[str, list[IndexModel]] = {
    "snapshots": [IndexModel([("tenant_id", ASCENDING)]), IndexModel([("created_at", ASCENDING)])],
    "payloads": [IndexModel([("tenant_id", ASCENDING), ("execution_id", ASCENDING)])],
    "archived_steps": [
        IndexModel(
            [("tenant_id", ASCENDING), ("execution_id", ASCENDING), ("step_name", ASCENDING)], unique=True
        )
    ],
    "ledger": [
        IndexModel([("entry_id", ASCENDING)], unique=True),
        IndexModel([("tenant_id", ASCENDING), ("execution_id", ASCENDING), ("recorded_at", ASCENDING)]),
        IndexModel([("tenant_id", ASCENDING), ("shared_run_id", ASCENDING), ("recorded_at", ASCENDING)]),
        IndexModel([("recorded_at", ASCENDING)]),
    ],
    "trace_spans": [
        IndexModel([("trace_id", ASCENDING), ("span_id", ASCENDING)], unique=True),
        IndexModel([("tenant_id", ASCENDING), ("execution_id", ASCENDING), ("start_ns", ASCENDING)]),
        IndexModel([("end_ns", ASCENDING)]),
    ],
    "forensics": [
        IndexModel([("record_id", ASCENDING)], unique=True),
        IndexModel([("tenant_id", ASCENDING), ("runtime_instance_id", ASCENDING)]),
        IndexModel([("tenant_id", ASCENDING), ("execution_id", ASCENDING)]),
        IndexModel([("recorded_at", ASCENDING)]),
    ],
    "run_index_history": [
        IndexModel([("event_id", ASCENDING)], unique=True),
        IndexModel([("tenant_id", ASCENDING), ("shared_run_id", ASCENDING)]),
        IndexModel([("tenant_id", ASCENDING), ("execution_id", ASCENDING)]),
        IndexModel([("recorded_at", ASCENDING)]),
    ],
    "run_records": [
        IndexModel([("tenant_id", ASCENDING), ("created_at", DESCENDING), ("_id", DESCENDING)]),
        IndexModel([("tenant_id", ASCENDING), ("local_run_id", ASCENDING)]),
        IndexModel([("tenant_id", ASCENDING), ("execution_id", ASCENDING)]),
        IndexModel([("ended_at", ASCENDING)]),
    ],
    "submitted_runs": [IndexModel([("submitted_at", ASCENDING)])],
    "schedules": [
        IndexModel([("tenant_id", ASCENDING), ("name", ASCENDING)], unique=True),
        IndexModel([("status", ASCENDING), ("_id", ASCENDING)]),
    ],
}


def to_document(record: BaseModel) -> Document:
    """JSON-pure fields (string keys, no custom types) but real BSON dates for datetimes."""
    document = record.model_dump(mode="json")
    for name, value in record:
        if isinstance(value, datetime):
            document[name] = value
    return document


def from_document(model: type[RecordT], document: Mapping[str, Any]) -> RecordT:
    return model.model_validate({k: v for k, v in document.items() if k != "_id"})


def filters(tenant_id: str, **optional: str | None) -> Document:
    return {"tenant_id": tenant_id, **{k: v for k, v in optional.items() if v is not None}}


def run_record_query(tenant_id: str, query: RunRecordQuery) -> Document:
    document = filters(
        tenant_id,
        shared_status=query.shared_status,
        status=query.status,
        pipeline_name=query.pipeline_name,
        submitted_by=query.submitted_by,
    )
    created: Document = {}
    if query.created_after is not None:
        created["$gte"] = query.created_after
    if query.created_before is not None:
        created["$lt"] = query.created_before
    if created:
        document["created_at"] = created
    cursors = [(cursor, op) for cursor, op in ((query.before, "$lt"), (query.after, "$gt")) if cursor]
    if cursors:
        document["$and"] = [
            {
                "$or": [
                    {"created_at": {op: cursor.created_at}},
                    {"created_at": cursor.created_at, "_id": {op: cursor.shared_run_id}},
                ]
            }
            for cursor, op in cursors
        ]
    return document


def only_duplicates(exc: BulkWriteError) -> bool:
    return all(error.get("code") == _DUPLICATE_KEY for error in exc.details.get("writeErrors", []))
