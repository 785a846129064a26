"""SQLite schema of the durable store and the row <-> record mapping of its record tables.

Owns the DDL (created idempotently on open) and `SqliteTable`: how a record's fields become
columns (JSON values as JSON text, datetimes as fixed-width UTC text so lexical order is time
order) and how its inserts are spelled. Must not open connections or run queries.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from functools import cached_property
from typing import Any, get_args

from pydantic import TypeAdapter

from runtime_core.storage._codec import sortable_timestamp
from runtime_core.storage._sql_tables import RecordT, RecordTable, record_tables

SCHEMA = """
CREATE TABLE IF NOT EXISTS snapshots (
    execution_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    pipeline_name TEXT NOT NULL,
    pipeline_version TEXT NOT NULL,
    status TEXT NOT NULL,
    snapshot TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS payloads (
    payload_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    step_name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    body BLOB NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS payloads_by_execution ON payloads (tenant_id, execution_id);
CREATE TABLE IF NOT EXISTS archived_steps (
    tenant_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    step_name TEXT NOT NULL,
    status TEXT NOT NULL,
    retry_count INTEGER NOT NULL,
    result_ref TEXT NOT NULL,
    result TEXT NOT NULL,
    archived_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, execution_id, step_name)
);
CREATE TABLE IF NOT EXISTS ledger (
    row_id INTEGER PRIMARY KEY,
    entry_id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    execution_id TEXT,
    shared_run_id TEXT,
    local_run_id TEXT,
    runtime_instance_id TEXT,
    assigned_runtime_instance_id TEXT,
    event TEXT NOT NULL,
    step_name TEXT,
    attributes TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    sequence INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_by_execution ON ledger (tenant_id, execution_id, recorded_at, sequence);
CREATE INDEX IF NOT EXISTS ledger_by_shared_run ON ledger (tenant_id, shared_run_id, recorded_at, sequence);
CREATE TABLE IF NOT EXISTS trace_spans (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    tenant_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    step_name TEXT,
    name TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    attributes TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_by_execution ON trace_spans (tenant_id, execution_id, start_ns);
CREATE TABLE IF NOT EXISTS forensics (
    row_id INTEGER PRIMARY KEY,
    record_id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    runtime_instance_id TEXT NOT NULL,
    shared_run_id TEXT,
    execution_id TEXT,
    kind TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS forensics_by_instance ON forensics (tenant_id, runtime_instance_id, recorded_at);
CREATE INDEX IF NOT EXISTS forensics_by_execution ON forensics (tenant_id, execution_id, recorded_at);
CREATE TABLE IF NOT EXISTS run_index_history (
    row_id INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    shared_run_id TEXT,
    local_run_id TEXT,
    execution_id TEXT,
    runtime_instance_id TEXT,
    status TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_index_by_shared_run
    ON run_index_history (tenant_id, shared_run_id, recorded_at);
CREATE TABLE IF NOT EXISTS health_probes (
    probe_id TEXT PRIMARY KEY,
    written_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_index_by_execution
    ON run_index_history (tenant_id, execution_id, recorded_at);
CREATE TABLE IF NOT EXISTS run_records (
    shared_run_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    local_run_id TEXT,
    execution_id TEXT,
    pipeline_name TEXT NOT NULL,
    pipeline_version TEXT NOT NULL,
    submitted_by TEXT NOT NULL,
    submit_mode TEXT NOT NULL,
    status TEXT NOT NULL,
    shared_status TEXT NOT NULL,
    queue_status TEXT,
    local_status TEXT,
    execution_status TEXT,
    control_status TEXT,
    failure_reason TEXT,
    assigned_runtime_instance_id TEXT,
    pump_runtime_instance_id TEXT,
    pump_worker_id TEXT,
    scale_out_request_id TEXT,
    snapshot TEXT NOT NULL,
    steps TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at TEXT NOT NULL,
    dispatched_at TEXT,
    started_at TEXT,
    ended_at TEXT NOT NULL,
    archived_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_records_newest_first ON run_records (tenant_id, created_at, shared_run_id);
CREATE INDEX IF NOT EXISTS run_records_by_local_run ON run_records (tenant_id, local_run_id);
CREATE INDEX IF NOT EXISTS run_records_by_execution ON run_records (tenant_id, execution_id);
CREATE INDEX IF NOT EXISTS run_records_by_end ON run_records (ended_at);
CREATE TABLE IF NOT EXISTS submitted_runs (
    shared_run_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    run TEXT NOT NULL,
    submitted_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS submitted_runs_by_age ON submitted_runs (submitted_at);
CREATE TABLE IF NOT EXISTS schedules (
    schedule_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    input TEXT NOT NULL,
    snapshot TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status_changed_at TEXT NOT NULL,
    last_tick_at TEXT,
    last_fired_at TEXT,
    last_run_id TEXT,
    last_outcome TEXT,
    fire_count INTEGER NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX IF NOT EXISTS schedules_by_status ON schedules (status, schedule_id);
CREATE INDEX IF NOT EXISTS ledger_by_age ON ledger (recorded_at);
CREATE INDEX IF NOT EXISTS spans_by_end ON trace_spans (end_ns);
CREATE INDEX IF NOT EXISTS forensics_by_age ON forensics (recorded_at);
CREATE INDEX IF NOT EXISTS snapshots_by_age ON snapshots (created_at);
CREATE INDEX IF NOT EXISTS run_index_by_age ON run_index_history (recorded_at);
"""


class SqliteTable(RecordTable[RecordT]):
    """JSON columns as JSON text, datetimes as sortable UTC text, `:name` parameters."""

    def insert_sql(self) -> str:
        return f"INSERT OR IGNORE INTO {self._into_values()}"

    def _into_values(self) -> str:
        names = ", ".join(self.columns)
        values = ", ".join(f":{c}" for c in self.columns)
        return f"{self.name} ({names}) VALUES ({values})"

    def upsert_sql(self, key: str) -> str:
        updates = ", ".join(f"{c} = excluded.{c}" for c in self.columns if c != key)
        return (
            f"INSERT INTO {self._into_values()} ON CONFLICT ({key}) DO UPDATE SET {updates} "
            f"WHERE {self.name}.tenant_id = excluded.tenant_id"
        )

    def replace_sql(self, key: str) -> str:
        return f"INSERT OR REPLACE INTO {self._into_values()}"

    @cached_property
    def _json_adapters(self) -> dict[str, TypeAdapter[Any]]:
        """Each JSON column's field type, which writes its value straight to JSON text."""
        return {c: TypeAdapter(self.model.model_fields[c].annotation) for c in self.json_columns}

    @cached_property
    def _datetime_columns(self) -> tuple[str, ...]:
        fields = self.model.model_fields
        return tuple(c for c in self.columns if c not in self.json_columns and _holds(fields[c].annotation))

    def to_row(self, record: RecordT) -> dict[str, Any]:
        # JSON columns are not dumped to plain values first: a 9,000-step terminal snapshot's
        # plain copy cost ~30 ms (and its garbage) before json.dumps walked it again. Column
        # kinds are known once per table, not found per row (two ledger rows per step).
        row = record.model_dump(mode="json", exclude=self.json_columns)
        for column, adapter in self._json_adapters.items():
            row[column] = adapter.dump_json(getattr(record, column)).decode()
        for column in self._datetime_columns:
            value = getattr(record, column)
            if value is not None:
                row[column] = sortable_timestamp(value)
        return row

    def from_row(self, row: sqlite3.Row) -> RecordT:
        return self.model.model_validate(
            {c: json.loads(row[c]) if c in self.json_columns else row[c] for c in self.columns}
        )


def _holds(annotation: Any) -> bool:
    """Whether a field's type is, or may be, a datetime."""
    return annotation is datetime or any(_holds(arg) for arg in get_args(annotation))


TABLES = record_tables(SqliteTable)
