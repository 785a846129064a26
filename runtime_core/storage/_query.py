"""The SQL backends' dialects (SQLite, PostgreSQL) and the WHERE clauses they share: tenant
scope, optional id filters and the run listing's filters and cursor, in each backend's
placeholder style.

Must not perform any I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime_core.storage._codec import sortable_timestamp
from runtime_core.storage._models import RunRecordQuery


@dataclass(frozen=True)
class SqlDialect:
    """How a backend spells a parameter and stores a datetime."""

    placeholder: str
    timestamp: Callable[[datetime], Any]

    def spell(self, sql: str) -> str:
        """`sql` written with `?` parameters, in this backend's placeholder style."""
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def where(self, tenant_id: str, **optional: str | None) -> tuple[str, list[Any]]:
        """`tenant_id = ?` AND `column = ?` for every optional filter that is given."""
        clauses, params = [f"tenant_id = {self.placeholder}"], [tenant_id]
        for column, value in optional.items():
            if value is not None:
                clauses.append(f"{column} = {self.placeholder}")
                params.append(value)
        return " AND ".join(clauses), params

    def run_record_where(self, tenant_id: str, query: RunRecordQuery) -> tuple[str, list[Any]]:
        """The listing's filters, and rows strictly after its cursor in newest-first order."""
        where, params = self.where(
            tenant_id,
            shared_status=query.shared_status,
            status=query.status,
            pipeline_name=query.pipeline_name,
            submitted_by=query.submitted_by,
        )
        clauses, p = [where], self.placeholder
        if query.created_after is not None:
            clauses.append(f"created_at >= {p}")
            params.append(self.timestamp(query.created_after))
        if query.created_before is not None:
            clauses.append(f"created_at < {p}")
            params.append(self.timestamp(query.created_before))
        for cursor, comparison in ((query.before, "<"), (query.after, ">")):
            if cursor is not None:
                clauses.append(f"(created_at, shared_run_id) {comparison} ({p}, {p})")
                params += [self.timestamp(cursor.created_at), cursor.shared_run_id]
        return " AND ".join(clauses), params

    @staticmethod
    def run_record_order(query: RunRecordQuery) -> str:
        direction = "ASC" if query.oldest_first else "DESC"
        return f"created_at {direction}, shared_run_id {direction}"

    def run_record_count_sql(self, tenant_id: str, query: RunRecordQuery) -> tuple[str, list[Any]]:
        """Records per status matching the listing's filters (its status, cursors and limit aside)."""
        unpaged = query.model_copy(update={"status": None, "before": None, "after": None})
        where, params = self.run_record_where(tenant_id, unpaged)
        return f"SELECT status, COUNT(*) AS records FROM run_records WHERE {where} GROUP BY status", params


SQLITE = SqlDialect("?", sortable_timestamp)
POSTGRES = SqlDialect("%s", lambda at: at)
