"""The PostgreSQL retrieval provider: named operations run as parameterized SQL on a psycopg 3 async pool.

Owns the pool (opened on first use in the running loop, closed with the provider), each
connection's session settings (read-only transactions, a statement timeout), binding the
operation's named inputs as query parameters (never formatted into the SQL), decoding rows
to JSON values, and classifying database errors for the retry engine (connection trouble
`transient`, a cancelled statement `timeout`, anything else `permanent`). Must never put the
password in a message.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._http_endpoint import secret_from_env
from runtime_core.steps._http_failures import redact
from runtime_core.steps.retrieval._operations import bound_values, jsonable, operation_spec, shaped
from runtime_core.steps.retrieval._settings import PostgresSettings


class PostgresRetrievalProvider:
    def __init__(self, name: str, settings: PostgresSettings) -> None:
        self.name = name
        self.settings = settings
        self.operations = tuple(sorted(settings.operations))
        self._pool: AsyncConnectionPool | None = None
        self._opening = asyncio.Lock()
        self._secrets: tuple[str, ...] = ()

    async def retrieve(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | list[Any]:
        sql = operation_spec(f"PostgreSQL provider {self.name!r}", self.settings.operations, operation)
        values = bound_values(operation, sql.params, params)
        try:
            pool = await self._open()
            async with pool.connection() as connection, connection.cursor(row_factory=dict_row) as cursor:
                await cursor.execute(sql.sql, values)
                rows = await cursor.fetchmany(sql.max_rows) if cursor.description else []
        except psycopg.Error as error:
            raise self._failure(operation, error) from None
        return shaped(operation, [_decoded(row, sql.json_columns) for row in rows], sql.result, values)

    async def _open(self) -> AsyncConnectionPool:
        async with self._opening:
            if self._pool is None:
                pool = AsyncConnectionPool(
                    self._conninfo(),
                    kwargs=self._session_options(),
                    min_size=self.settings.min_size,
                    max_size=self.settings.max_size,
                    timeout=self.settings.connect_timeout_s,
                    name=f"retrieval-{self.name}",
                    open=False,
                )
                await pool.open()
                self._pool = pool
            return self._pool

    def _conninfo(self) -> str:
        s = self.settings
        what = f"of PostgreSQL provider {self.name!r}"
        conninfo = secret_from_env(s.conninfo_env, f"the conninfo {what}") if s.conninfo_env else s.conninfo
        secrets = [conninfo] if s.conninfo_env else []
        if s.password_env:
            password = secret_from_env(s.password_env, f"the password {what}")
            conninfo = make_conninfo(conninfo, password=password)
            secrets += [password, conninfo]
        self._secrets = tuple(secrets)
        return conninfo

    def _session_options(self) -> dict[str, Any]:
        s = self.settings
        options = f"-c statement_timeout={s.statement_timeout_ms}"
        if s.read_only:
            options += " -c default_transaction_read_only=on"
        return {"connect_timeout": max(1, round(s.connect_timeout_s)), "options": options}

    def _failure(self, operation: str, error: psycopg.Error) -> StepFailure:
        if isinstance(error, psycopg.errors.QueryCanceled):
            code = "timeout"
        elif isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            code = "transient"
        else:
            code = "permanent"
        text = redact(f"{type(error).__name__}: {error}", self._secrets)
        return StepFailure(f"PostgreSQL provider {self.name!r}, operation {operation!r}: {text}", code=code)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


def _decoded(row: dict[str, Any], json_columns: tuple[str, ...]) -> dict[str, Any]:
    """Row values as JSON; `json_columns` hold JSON text (json/jsonb columns arrive decoded already)."""
    record = jsonable(row)
    for column in json_columns:
        if isinstance(record.get(column), str):
            record[column] = _json_text(record[column])
    return record


def _json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
