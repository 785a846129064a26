"""PostgreSQL schema of the durable store: its versioned migrations and the row <-> record mapping.

Owns the DDL, as an ordered tuple of forward-only migrations (a released migration is never
edited: a new version is appended; its checksum is recorded when applied), and
`PostgresTable`: how a record's fields become columns (JSON fields as JSONB, datetimes as
timestamptz) and how its inserts, single and batched, are spelled. Every query the store
makes has an index here (tests/integration/test_postgres_store.py proves no sequential scan).
Must not open connections or run queries.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from runtime_core.storage._sql_tables import RecordT, RecordTable, record_tables


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


_INITIAL = """
CREATE TABLE snapshots (
    execution_id text PRIMARY KEY,
    tenant_id text NOT NULL,
    pipeline_name text NOT NULL,
    pipeline_version text NOT NULL,
    status text NOT NULL,
    snapshot jsonb NOT NULL,
    fingerprint text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX snapshots_by_age ON snapshots (created_at);
CREATE TABLE payloads (
    payload_id text PRIMARY KEY,
    tenant_id text NOT NULL,
    execution_id text NOT NULL,
    step_name text NOT NULL,
    content_type text NOT NULL,
    size bigint NOT NULL,
    sha256 text NOT NULL,
    body bytea NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX payloads_by_execution ON payloads (tenant_id, execution_id);
CREATE TABLE archived_steps (
    tenant_id text NOT NULL,
    execution_id text NOT NULL,
    step_name text NOT NULL,
    status text NOT NULL,
    retry_count integer NOT NULL,
    result_ref jsonb,
    result jsonb,
    archived_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, execution_id, step_name)
);
CREATE TABLE ledger (
    row_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_id text NOT NULL UNIQUE,
    tenant_id text NOT NULL,
    execution_id text,
    shared_run_id text,
    local_run_id text,
    runtime_instance_id text,
    assigned_runtime_instance_id text,
    event text NOT NULL,
    step_name text,
    attributes jsonb NOT NULL,
    recorded_at timestamptz NOT NULL,
    sequence bigint NOT NULL
);
CREATE INDEX ledger_by_tenant ON ledger (tenant_id, recorded_at, sequence, row_id);
CREATE INDEX ledger_by_execution ON ledger (tenant_id, execution_id, recorded_at, sequence, row_id);
CREATE INDEX ledger_by_shared_run ON ledger (tenant_id, shared_run_id, recorded_at, sequence, row_id);
CREATE INDEX ledger_by_age ON ledger (recorded_at);
CREATE TABLE trace_spans (
    trace_id text NOT NULL,
    span_id text NOT NULL,
    parent_span_id text,
    tenant_id text NOT NULL,
    execution_id text NOT NULL,
    step_name text,
    name text NOT NULL,
    start_ns bigint NOT NULL,
    end_ns bigint NOT NULL,
    status text NOT NULL,
    attributes jsonb NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX spans_by_execution ON trace_spans (tenant_id, execution_id, start_ns, span_id);
CREATE INDEX spans_by_end ON trace_spans (end_ns);
CREATE TABLE forensics (
    row_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record_id text NOT NULL UNIQUE,
    tenant_id text NOT NULL,
    runtime_instance_id text NOT NULL,
    shared_run_id text,
    execution_id text,
    kind text NOT NULL,
    action text NOT NULL,
    detail jsonb NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX forensics_by_tenant ON forensics (tenant_id, recorded_at, row_id);
CREATE INDEX forensics_by_instance ON forensics (tenant_id, runtime_instance_id, recorded_at, row_id);
CREATE INDEX forensics_by_execution ON forensics (tenant_id, execution_id, recorded_at, row_id);
CREATE INDEX forensics_by_age ON forensics (recorded_at);
CREATE TABLE run_index_history (
    row_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id text NOT NULL UNIQUE,
    tenant_id text NOT NULL,
    shared_run_id text,
    local_run_id text,
    execution_id text,
    runtime_instance_id text,
    status text NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX run_index_by_tenant ON run_index_history (tenant_id, recorded_at, row_id);
CREATE INDEX run_index_by_shared_run ON run_index_history (tenant_id, shared_run_id, recorded_at, row_id);
CREATE INDEX run_index_by_execution ON run_index_history (tenant_id, execution_id, recorded_at, row_id);
CREATE INDEX run_index_by_age ON run_index_history (recorded_at);
CREATE TABLE run_records (
    shared_run_id text PRIMARY KEY,
    tenant_id text NOT NULL,
    local_run_id text,
    execution_id text,
    pipeline_name text NOT NULL,
    pipeline_version text NOT NULL,
    submitted_by text NOT NULL,
    submit_mode text NOT NULL,
    status text NOT NULL,
    shared_status text NOT NULL,
    queue_status text,
    local_status text,
    execution_status text,
    control_status text,
    failure_reason text,
    assigned_runtime_instance_id text,
    pump_runtime_instance_id text,
    pump_worker_id text,
    scale_out_request_id text,
    snapshot jsonb NOT NULL,
    steps jsonb NOT NULL,
    result jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    dispatched_at timestamptz,
    started_at timestamptz,
    ended_at timestamptz NOT NULL,
    archived_at timestamptz NOT NULL
);
CREATE INDEX run_records_newest_first ON run_records (tenant_id, created_at DESC, shared_run_id DESC);
CREATE INDEX run_records_by_local_run ON run_records (tenant_id, local_run_id);
CREATE INDEX run_records_by_execution ON run_records (tenant_id, execution_id);
CREATE INDEX run_records_by_end ON run_records (ended_at);
CREATE TABLE submitted_runs (
    shared_run_id text PRIMARY KEY,
    tenant_id text NOT NULL,
    run jsonb NOT NULL,
    submitted_at timestamptz NOT NULL
);
CREATE INDEX submitted_runs_by_age ON submitted_runs (submitted_at);
CREATE TABLE health_probes (
    probe_id text PRIMARY KEY,
    written_at timestamptz NOT NULL
);
"""

_SCHEDULES = """
CREATE TABLE schedules (
    schedule_id text PRIMARY KEY,
    tenant_id text NOT NULL,
    name text NOT NULL,
    spec jsonb NOT NULL,
    pipeline jsonb NOT NULL,
    input jsonb NOT NULL,
    snapshot jsonb NOT NULL,
    status text NOT NULL,
    created_at timestamptz NOT NULL,
    status_changed_at timestamptz NOT NULL,
    last_tick_at timestamptz,
    last_fired_at timestamptz,
    last_run_id text,
    last_outcome text,
    fire_count bigint NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX schedules_by_status ON schedules (status, schedule_id);
"""

# Append only. A database records the versions it applied; code that finds a version it does
# not know (a newer release migrated the database) refuses to start.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial durable store schema", _INITIAL),
    Migration(2, "schedules", _SCHEDULES),
)


class PostgresTable(RecordTable[RecordT]):
    """JSON columns as JSONB, datetimes as timestamptz, `%(name)s` parameters."""

    def _insert_sql(self, on_conflict: str, conflict_key: str = "") -> str:
        names = ", ".join(self.columns)
        values = ", ".join(f"%({c})s" for c in self.columns)
        target = f"({conflict_key})" if conflict_key else ""
        return f"INSERT INTO {self.name} ({names}) VALUES ({values}) ON CONFLICT {target} {on_conflict}"

    def insert_sql(self) -> str:
        return self._insert_sql("DO NOTHING")

    def upsert_sql(self, key: str) -> str:
        return self._upsert_sql(key, same_tenant_only=True)

    def replace_sql(self, key: str) -> str:
        return self._upsert_sql(key, same_tenant_only=False)

    def _upsert_sql(self, key: str, *, same_tenant_only: bool) -> str:
        updates = ", ".join(f"{c} = excluded.{c}" for c in self.columns if c not in key.split(", "))
        guard = f" WHERE {self.name}.tenant_id = excluded.tenant_id" if same_tenant_only else ""
        return self._insert_sql(f"DO UPDATE SET {updates}{guard}", key)

    def bulk_insert_sql(self, column_types: dict[str, str], conflict_key: str) -> str:
        """One INSERT of a whole batch: each column arrives as one array (see `to_columns`), rows in
        batch order; rows whose `conflict_key` is already stored are skipped."""
        names = ", ".join(self.columns)
        arrays = ", ".join(f"%s::{column_types.get(c, 'text')}[]" for c in self.columns)
        return (
            f"INSERT INTO {self.name} ({names}) SELECT {names} "
            f"FROM unnest({arrays}) WITH ORDINALITY AS batch ({names}, batch_order) "
            f"ORDER BY batch_order ON CONFLICT ({conflict_key}) DO NOTHING"
        )

    def to_row(self, record: RecordT) -> dict[str, Any]:
        plain = record.model_dump(mode="json")
        return {c: self._value(c, getattr(record, c), plain[c]) for c in self.columns}

    def to_columns(self, records: list[RecordT]) -> list[list[Any]]:
        rows = [self.to_row(record) for record in records]
        return [[row[c] for row in rows] for c in self.columns]

    def _value(self, column: str, value: Any, plain: Any) -> Any:
        if column in self.json_columns:
            return Jsonb(plain)
        return value if isinstance(value, datetime) else plain  # datetimes stay timestamptz

    def from_row(self, row: dict[str, Any]) -> RecordT:
        return self.model.model_validate(row)


TABLES = record_tables(PostgresTable)
# Batches arrive as one array per column: the element types of the columns that are not text.
BULK_COLUMN_TYPES = {
    "ledger": {"attributes": "jsonb", "recorded_at": "timestamptz", "sequence": "bigint"},
    "trace_spans": {"start_ns": "bigint", "end_ns": "bigint", "attributes": "jsonb"},
}
