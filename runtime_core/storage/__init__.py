"""Durable storage: everything that must outlive Redis hot state.

Owns the DurableStore protocol and its two backends behind one contract: SQLite (embedded
default, one WAL-mode file shared by every process on the machine) and MongoDB (PyMongo's
`AsyncMongoClient`). Stores terminal snapshots, externalized payloads (sha256-verified on
read), archived steps, the ledger, trace spans, recovery forensics, run-index history and
the run records of finished runs (with their newest-first listing), always scoped by
tenant, and purges each record kind older than a cutoff. Must not know about Redis, queues
or DAG transitions.
"""

from runtime_core.storage._errors import PayloadCorruptedError
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
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
    UtcDatetime,
    utc_now,
)
from runtime_core.storage._mongo import MongoDurableStore
from runtime_core.storage._protocol import DEFAULT_LEDGER_LIMIT, DEFAULT_PURGE_BATCH, DurableStore
from runtime_core.storage._settings import SQLITE_FILE_NAME, DurableStoreSettings
from runtime_core.storage._sqlite import SqliteDurableStore

__all__ = [
    "DEFAULT_LEDGER_LIMIT",
    "DEFAULT_PURGE_BATCH",
    "SQLITE_FILE_NAME",
    "ArchivedStep",
    "DurableRecordKind",
    "DurableStore",
    "DurableStoreSettings",
    "ForensicsRecord",
    "LedgerEntry",
    "MongoDurableStore",
    "PayloadCorruptedError",
    "PayloadRef",
    "RunIndexEvent",
    "RunRecord",
    "RunRecordCursor",
    "RunRecordQuery",
    "RunRecordStep",
    "RunRecordStepError",
    "SqliteDurableStore",
    "SubmittedRun",
    "TerminalSnapshot",
    "TraceSpan",
    "UtcDatetime",
    "open_durable_store",
    "utc_now",
]
