"""MongoDurableStore: the production backend on PyMongo's native async client.

Owns the `AsyncMongoClient`, creating the indexes on open and the queries behind the
DurableStore contract; how records become documents is _mongo_documents'. Must not know about
Redis or queues.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from urllib.parse import unquote_plus, urlsplit

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    DocumentTooLarge,
    DuplicateKeyError,
    InvalidURI,
)

from runtime_core.errors import ConfigurationError as InvalidConfigurationError
from runtime_core.errors import InputTooLargeError, StoreUnavailableError
from runtime_core.storage._codec import payload_ref, verified_body
from runtime_core.storage._errors import payload_of_another_tenant, shared_run_of_another_tenant
from runtime_core.storage._models import (
    ArchivedStep,
    DurableRecordKind,
    ForensicsRecord,
    LedgerEntry,
    PayloadRef,
    RunIndexEvent,
    RunRecord,
    RunRecordQuery,
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
    utc_now,
)
from runtime_core.storage._mongo_documents import (
    INDEXES,
    Document,
    RecordT,
    filters,
    from_document,
    only_duplicates,
    run_record_query,
    to_document,
)
from runtime_core.storage._mongo_schedules import MongoSchedules
from runtime_core.storage._protocol import DEFAULT_LEDGER_LIMIT, DEFAULT_PURGE_BATCH, READINESS_PROBE_ID

# Per record kind: (collection, age field) pairs a purge deletes from, oldest first.
_PURGED_BY_AGE: dict[DurableRecordKind, tuple[tuple[str, str], ...]] = {
    DurableRecordKind.LEDGER: (("ledger", "recorded_at"),),
    DurableRecordKind.TRACE: (("trace_spans", "end_ns"),),
    DurableRecordKind.FORENSICS: (("forensics", "recorded_at"),),
    DurableRecordKind.RUN_RECORDS: (
        ("run_records", "ended_at"),
        ("run_index_history", "recorded_at"),
        ("submitted_runs", "submitted_at"),
    ),
}


def _unavailable(exc: BaseException, uri: str = "") -> StoreUnavailableError:
    return StoreUnavailableError(
        f"MongoDB durable store is unavailable: {_without_password(str(exc), uri)}",
        hint="Check MONGODB_URI points at a reachable server and the credentials are valid.",
    )


def _without_password(text: str, uri: str) -> str:
    """`text` with the URI's password masked, should a driver message ever echo it."""
    try:
        password = urlsplit(uri).password if uri else None
    except ValueError:  # a URI too broken to find its password in: say nothing of it
        return "the driver's message is withheld (the URI does not parse)"
    for spelling in {password, unquote_plus(password)} if password else ():
        text = text.replace(spelling, "***")
    return text


class MongoDurableStore(MongoSchedules):
    """DurableStore over one MongoDB database."""

    def __init__(self, client: AsyncMongoClient[Document], database: AsyncDatabase[Document]) -> None:
        self._client = client
        self._db = database
        self._closed = False

    @classmethod
    async def open(cls, uri: str, database: str, timeout_ms: int = 5000) -> MongoDurableStore:
        """Connect, then create every index (idempotent); StoreUnavailableError when unreachable,
        ConfigurationError when the URI is invalid (neither error shows its password)."""
        try:
            client: AsyncMongoClient[Document] = AsyncMongoClient(
                uri,
                tz_aware=True,
                serverSelectionTimeoutMS=timeout_ms,
                connectTimeoutMS=timeout_ms,
            )
        except (InvalidURI, ValueError) as exc:  # the URI itself: retrying will not help
            raise InvalidConfigurationError(
                f"The MongoDB URI is invalid: {_without_password(str(exc), uri)}",
                hint="Fix MONGODB_URI (or MCP_RUNTIME_DURABLE_URL): mongodb://user:password@host/ "
                "with the user and password percent-encoded.",
            ) from None
        except ConfigurationError as exc:  # e.g. a mongodb+srv:// name that does not resolve
            raise _unavailable(exc, uri) from None
        store = cls(client, client[database])
        try:
            async with store._guard(uri):
                for name, indexes in INDEXES.items():
                    await store._db[name].create_indexes(indexes)
        except StoreUnavailableError:
            await client.close()
            raise
        return store

    @asynccontextmanager
    async def _guard(self, uri: str = "") -> AsyncIterator[None]:
        if self._closed:
            raise _unavailable(RuntimeError("the store was closed"))
        try:
            yield
        except (ConnectionFailure, ConfigurationError) as exc:
            raise _unavailable(exc, uri) from None

    async def _insert_ignoring_duplicates(self, name: str, documents: list[Document]) -> None:
        if not documents:
            return
        async with self._guard():
            try:
                await self._db[name].insert_many(documents, ordered=False)
            except BulkWriteError as exc:
                if not only_duplicates(exc):
                    raise

    async def _find(
        self, model: type[RecordT], name: str, query: Document, sort: list[tuple[str, int]], limit: int = 0
    ) -> list[RecordT]:
        documents = await self._find_documents(name, query, sort, limit)
        return [from_document(model, document) for document in documents]

    async def _find_documents(
        self, name: str, query: Document, sort: list[tuple[str, int]], limit: int = 0
    ) -> list[Document]:
        """The documents as stored, not yet records."""
        async with self._guard():
            return [document async for document in self._db[name].find(query).sort(sort).limit(limit)]

    # Terminal snapshots

    async def put_snapshot(self, snapshot: TerminalSnapshot) -> bool:
        async with self._guard():
            try:
                await self._db["snapshots"].insert_one(
                    {"_id": snapshot.execution_id, **to_document(snapshot)}
                )
            except DuplicateKeyError:
                return False
        return True

    async def get_snapshot(self, execution_id: str, tenant_id: str) -> TerminalSnapshot | None:
        async with self._guard():
            document = await self._db["snapshots"].find_one({"_id": execution_id, "tenant_id": tenant_id})
        return from_document(TerminalSnapshot, document) if document else None

    # Payloads

    async def put_payload(
        self,
        payload_id: str,
        tenant_id: str,
        execution_id: str,
        step_name: str,
        body: bytes,
        content_type: str,
    ) -> PayloadRef:
        ref = payload_ref(payload_id, body)
        fields = {
            "execution_id": execution_id,
            "step_name": step_name,
            "content_type": content_type,
            "size": ref.size,
            "sha256": ref.sha256,
            "body": body,
            "created_at": utc_now(),
        }
        async with self._guard():
            try:
                await self._db["payloads"].update_one(
                    {"_id": payload_id, "tenant_id": tenant_id}, {"$set": fields}, upsert=True
                )
            except DuplicateKeyError as exc:
                raise payload_of_another_tenant(payload_id) from exc
            except DocumentTooLarge as exc:
                raise InputTooLargeError(
                    f"payload {payload_id} ({ref.size} bytes) exceeds MongoDB's document size limit",
                    hint="Lower the step's output size or split it into several payloads.",
                ) from exc
        return ref

    async def get_payload(self, payload_id: str, tenant_id: str) -> bytes | None:
        async with self._guard():
            document = await self._db["payloads"].find_one(
                {"_id": payload_id, "tenant_id": tenant_id}, {"body": 1, "sha256": 1}
            )
        if document is None:
            return None
        return verified_body(payload_id, bytes(document["body"]), document["sha256"])

    async def delete_payloads_for_execution(self, execution_id: str, tenant_id: str) -> int:
        async with self._guard():
            result = await self._db["payloads"].delete_many(filters(tenant_id, execution_id=execution_id))
        return result.deleted_count

    # Archived steps

    async def archive_step(self, step: ArchivedStep) -> None:
        key = filters(step.tenant_id, execution_id=step.execution_id, step_name=step.step_name)
        async with self._guard():
            await self._db["archived_steps"].replace_one(key, to_document(step), upsert=True)

    async def get_archived_step(
        self, execution_id: str, step_name: str, tenant_id: str
    ) -> ArchivedStep | None:
        async with self._guard():
            document = await self._db["archived_steps"].find_one(
                filters(tenant_id, execution_id=execution_id, step_name=step_name)
            )
        return from_document(ArchivedStep, document) if document else None

    async def list_archived_steps(self, execution_id: str, tenant_id: str) -> list[ArchivedStep]:
        query = filters(tenant_id, execution_id=execution_id)
        return await self._find(ArchivedStep, "archived_steps", query, [("step_name", ASCENDING)])

    # Ledger

    async def append_ledger(self, entries: list[LedgerEntry]) -> None:
        await self._insert_ignoring_duplicates("ledger", [to_document(e) for e in entries])

    async def list_ledger(
        self,
        tenant_id: str,
        execution_id: str | None = None,
        shared_run_id: str | None = None,
        limit: int = DEFAULT_LEDGER_LIMIT,
    ) -> list[LedgerEntry]:
        query = filters(tenant_id, execution_id=execution_id, shared_run_id=shared_run_id)
        order = [("recorded_at", ASCENDING), ("sequence", ASCENDING), ("_id", ASCENDING)]
        return await self._find(LedgerEntry, "ledger", query, order, limit)

    async def has_ledger_event(self, tenant_id: str, execution_id: str, event: str) -> bool:
        query = filters(tenant_id, execution_id=execution_id, event=event)
        async with self._guard():
            return await self._db["ledger"].find_one(query, {"_id": 1}) is not None

    # Trace spans

    async def put_spans(self, spans: list[TraceSpan]) -> None:
        await self._insert_ignoring_duplicates("trace_spans", [to_document(s) for s in spans])

    async def list_spans(self, tenant_id: str, execution_id: str) -> list[TraceSpan]:
        query = filters(tenant_id, execution_id=execution_id)
        order = [("start_ns", ASCENDING), ("span_id", ASCENDING)]
        return await self._find(TraceSpan, "trace_spans", query, order)

    async def has_span(self, tenant_id: str, trace_id: str, span_id: str) -> bool:
        query = filters(tenant_id, trace_id=trace_id, span_id=span_id)
        async with self._guard():
            return await self._db["trace_spans"].find_one(query, {"_id": 1}) is not None

    # Recovery forensics

    async def put_forensics(self, record: ForensicsRecord) -> None:
        await self._insert_ignoring_duplicates("forensics", [to_document(record)])

    async def list_forensics(
        self,
        tenant_id: str,
        runtime_instance_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[ForensicsRecord]:
        query = filters(tenant_id, runtime_instance_id=runtime_instance_id, execution_id=execution_id)
        order = [("recorded_at", ASCENDING), ("_id", ASCENDING)]
        return await self._find(ForensicsRecord, "forensics", query, order)

    # Run-execution index history

    async def append_run_index_event(self, event: RunIndexEvent) -> None:
        await self._insert_ignoring_duplicates("run_index_history", [to_document(event)])

    async def list_run_index_history(
        self,
        tenant_id: str,
        shared_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> list[RunIndexEvent]:
        query = filters(tenant_id, shared_run_id=shared_run_id, execution_id=execution_id)
        order = [("recorded_at", ASCENDING), ("_id", ASCENDING)]
        return await self._find(RunIndexEvent, "run_index_history", query, order)

    # Run records

    async def put_run_record(self, record: RunRecord) -> None:
        await self._put_shared_run_document("run_records", record, "run record")

    async def _put_shared_run_document(self, name: str, record: RunRecord | SubmittedRun, noun: str) -> None:
        """Upsert a document keyed by SharedRunId; one of another tenant under that id is a conflict."""
        async with self._guard():
            try:
                await self._db[name].replace_one(
                    {"_id": record.shared_run_id, "tenant_id": record.tenant_id},
                    {"_id": record.shared_run_id, **to_document(record)},
                    upsert=True,
                )
            except DuplicateKeyError as exc:
                raise shared_run_of_another_tenant(noun, record.shared_run_id) from exc

    async def find_run_record(
        self,
        tenant_id: str,
        *,
        shared_run_id: str | None = None,
        local_run_id: str | None = None,
        execution_id: str | None = None,
    ) -> RunRecord | None:
        query = filters(
            tenant_id, shared_run_id=shared_run_id, local_run_id=local_run_id, execution_id=execution_id
        )
        found = await self._find(RunRecord, "run_records", query, [("created_at", DESCENDING)], 1)
        return found[0] if found else None

    async def list_run_records(self, tenant_id: str, query: RunRecordQuery) -> list[RunRecord]:
        direction = ASCENDING if query.oldest_first else DESCENDING
        order = [("created_at", direction), ("_id", direction)]
        return await self._find(
            RunRecord, "run_records", run_record_query(tenant_id, query), order, query.limit
        )

    async def count_run_records(self, tenant_id: str, query: RunRecordQuery) -> dict[str, int]:
        unpaged = query.model_copy(update={"status": None, "before": None, "after": None})
        pipeline = [
            {"$match": run_record_query(tenant_id, unpaged)},
            {"$group": {"_id": "$status", "records": {"$sum": 1}}},
        ]
        async with self._guard():
            cursor = await self._db["run_records"].aggregate(pipeline)
            return {str(group["_id"]): int(group["records"]) async for group in cursor}

    # Submitted runs

    async def put_submitted_run(self, record: SubmittedRun) -> None:
        await self._put_shared_run_document("submitted_runs", record, "submitted run")

    async def delete_submitted_run(self, tenant_id: str, shared_run_id: str) -> None:
        async with self._guard():
            await self._db["submitted_runs"].delete_one({"_id": shared_run_id, "tenant_id": tenant_id})

    async def list_submitted_runs(self, after: str | None = None, limit: int = 500) -> list[SubmittedRun]:
        query = {"_id": {"$gt": after}} if after is not None else {}
        return await self._find(SubmittedRun, "submitted_runs", query, [("_id", ASCENDING)], limit)

    # Retention

    async def purge(
        self, kind: DurableRecordKind, older_than: datetime, limit: int = DEFAULT_PURGE_BATCH
    ) -> int:
        if kind is DurableRecordKind.SNAPSHOTS:
            return await self._purge_snapshots(older_than, limit)
        cutoff: datetime | int = (
            int(older_than.timestamp() * 1e9) if kind is DurableRecordKind.TRACE else older_than
        )
        deleted = 0
        for name, age_field in _PURGED_BY_AGE[kind]:
            deleted += await self._delete_oldest(name, {age_field: {"$lt": cutoff}}, age_field, limit)
        return deleted

    async def _delete_oldest(self, name: str, query: Document, age_field: str, limit: int) -> int:
        async with self._guard():
            cursor = self._db[name].find(query, {"_id": 1}).sort(age_field, ASCENDING).limit(limit)
            ids = [document["_id"] async for document in cursor]
            if not ids:
                return 0
            result = await self._db[name].delete_many({"_id": {"$in": ids}})
        return result.deleted_count

    async def _purge_snapshots(self, older_than: datetime, limit: int) -> int:
        """The oldest terminal snapshots with their executions' payloads and archived steps."""
        query = {"created_at": {"$lt": older_than}}
        async with self._guard():
            cursor = (
                self._db["snapshots"].find(query, {"tenant_id": 1}).sort("created_at", ASCENDING).limit(limit)
            )
            executions = [(document["tenant_id"], document["_id"]) async for document in cursor]
            for tenant_id, execution_id in executions:
                key = filters(tenant_id, execution_id=execution_id)
                await self._db["payloads"].delete_many(key)
                await self._db["archived_steps"].delete_many(key)
                await self._db["snapshots"].delete_one({"_id": execution_id, "tenant_id": tenant_id})
        return len(executions)

    # Lifecycle

    async def health(self) -> None:
        async with self._guard():
            await self._client.admin.command("ping")

    async def probe_write(self) -> None:
        async with self._guard():
            await self._db["health_probes"].update_one(
                {"_id": READINESS_PROBE_ID}, {"$set": {"written_at": utc_now()}}, upsert=True
            )

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._client.close()
