"""Durable storage: everything that must outlive Redis hot state.

Owns the DurableStore protocol and its three backends behind one contract: SQLite (embedded
default, one WAL-mode file shared by every process on the machine), PostgreSQL (psycopg 3 async
pool, JSONB, versioned migrations under an advisory lock: the store several hosts share) and
MongoDB (PyMongo's `AsyncMongoClient`). Stores terminal snapshots, externalized payloads
(sha256-verified on read), archived steps, the ledger, trace spans, recovery forensics,
run-index history, the run records of finished runs (with their newest-first listing) and
tenants' schedules, always scoped by tenant, and purges each record kind older than a
cutoff. Must not know about Redis, queues or DAG transitions.
"""

from runtime_core.storage._errors import PayloadCorruptedError, SchemaVersionError
from runtime_core.storage._factory import open_durable_store
from runtime_core.storage._models import (
    ArchivedStep,
    DurableRecordKind,
    ForensicsRecord,
    LedgerEntry,
    PayloadRef,
    RunIndexEvent,
    RunRecord,
    RunRecordCursor,
    RunRecordQuery,
    RunRecordStep,
    RunRecordStepError,
    ScheduleFire,
    SchedulePage,
    ScheduleRecord,
    ScheduleScan,
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
    UnreadableSchedule,
    UtcDatetime,
    utc_now,
)
from runtime_core.storage._mongo import MongoDurableStore
from runtime_core.storage._postgres import PostgresDurableStore
from runtime_core.storage._postgres_schema import MIGRATIONS, Migration
from runtime_core.storage._protocol import (
    DEFAULT_LEDGER_LIMIT,
    DEFAULT_PURGE_BATCH,
    DEFAULT_SCHEDULE_PAGE,
    DurableStore,
)
from runtime_core.storage._settings import (
    DURABLE_PASSWORD_ENV,
    DURABLE_URL_ENV,
    SQLITE_FILE_NAME,
    DurableStoreSettings,
)
from runtime_core.storage._sqlite import SqliteDurableStore

__all__ = [
    "DEFAULT_LEDGER_LIMIT",
    "DEFAULT_PURGE_BATCH",
    "DEFAULT_SCHEDULE_PAGE",
    "DURABLE_PASSWORD_ENV",
    "DURABLE_URL_ENV",
    "MIGRATIONS",
    "SQLITE_FILE_NAME",
    "ArchivedStep",
    "DurableRecordKind",
    "DurableStore",
    "DurableStoreSettings",
    "ForensicsRecord",
    "LedgerEntry",
    "Migration",
    "MongoDurableStore",
    "PayloadCorruptedError",
    "PayloadRef",
    "PostgresDurableStore",
    "RunIndexEvent",
    "RunRecord",
    "RunRecordCursor",
    "RunRecordQuery",
    "RunRecordStep",
    "RunRecordStepError",
    "ScheduleFire",
    "SchedulePage",
    "ScheduleRecord",
    "ScheduleScan",
    "SchemaVersionError",
    "SqliteDurableStore",
    "SubmittedRun",
    "TerminalSnapshot",
    "TraceSpan",
    "UnreadableSchedule",
    "UtcDatetime",
    "open_durable_store",
    "utc_now",
]
