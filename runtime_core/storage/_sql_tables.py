"""The record tables of the SQL backends (SQLite, PostgreSQL): which record lives where.

Owns `RecordTable`, a table whose columns are exactly one record model's fields (their names
and the SELECT of them), and `RecordTables`, every table by role with its JSON columns, built
for one backend from its RecordTable subclass: the subclass says how a value becomes a column
and back, and how an insert that meets a stored key is spelled. Must not open connections or
run queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from runtime_core.storage._models import (
    ArchivedStep,
    ForensicsRecord,
    LedgerEntry,
    RunIndexEvent,
    RunRecord,
    ScheduleRecord,
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
)

RecordT = TypeVar("RecordT", bound=BaseModel)


@dataclass(frozen=True)
class RecordTable(Generic[RecordT]):
    """One table whose columns are exactly the fields of one record model."""

    name: str
    model: type[RecordT]
    json_columns: frozenset[str] = frozenset()

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """The model's field names, computed once: every row read and written walks them."""
        return tuple(self.model.model_fields)

    def select_sql(self, where: str, order_by: str) -> str:
        return f"SELECT {', '.join(self.columns)} FROM {self.name} WHERE {where} ORDER BY {order_by}"

    def insert_sql(self) -> str:
        """Insert one row (named parameters); a row whose unique key is stored stays as it is."""
        raise NotImplementedError

    def upsert_sql(self, key: str) -> str:
        """Insert, or replace every other column of the row with the same `key` of the same tenant."""
        raise NotImplementedError

    def replace_sql(self, key: str) -> str:
        """Insert, or replace the row with the same `key` (a key that includes the tenant)."""
        raise NotImplementedError

    def to_row(self, record: RecordT) -> dict[str, Any]:
        raise NotImplementedError

    def from_row(self, row: Any) -> RecordT:
        raise NotImplementedError


@dataclass(frozen=True)
class RecordTables:
    snapshots: RecordTable[TerminalSnapshot]
    archived_steps: RecordTable[ArchivedStep]
    ledger: RecordTable[LedgerEntry]
    trace_spans: RecordTable[TraceSpan]
    forensics: RecordTable[ForensicsRecord]
    run_index_history: RecordTable[RunIndexEvent]
    run_records: RecordTable[RunRecord]
    submitted_runs: RecordTable[SubmittedRun]
    schedules: RecordTable[ScheduleRecord]


def record_tables(table: type[RecordTable[Any]]) -> RecordTables:
    """Every record table, as the backend's RecordTable subclass `table`."""
    return RecordTables(
        snapshots=table("snapshots", TerminalSnapshot, frozenset({"snapshot"})),
        archived_steps=table("archived_steps", ArchivedStep, frozenset({"result_ref", "result"})),
        ledger=table("ledger", LedgerEntry, frozenset({"attributes"})),
        trace_spans=table("trace_spans", TraceSpan, frozenset({"attributes"})),
        forensics=table("forensics", ForensicsRecord, frozenset({"detail"})),
        run_index_history=table("run_index_history", RunIndexEvent),
        run_records=table("run_records", RunRecord, frozenset({"snapshot", "steps", "result"})),
        submitted_runs=table("submitted_runs", SubmittedRun, frozenset({"run"})),
        schedules=table("schedules", ScheduleRecord, frozenset({"spec", "pipeline", "input", "snapshot"})),
    )
