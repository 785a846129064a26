"""PostgresPool: the connection pool of the PostgreSQL durable store and its error rules.

Owns the psycopg 3 async pool (autocommit connections with dict rows; the password passed aside
from the conninfo; connect, pool-wait and unacknowledged-write bounds the URL did not set), the
retry of work whose connection was lost (every store operation is idempotent, so it runs once
more on a fresh connection: a server restart or a stale pooled connection costs no error), and
the mapping of driver errors to typed errors whose messages never carry the password. Must not
know about records or the schema.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from runtime_core.errors import InvalidArgumentError, StoreUnavailableError

T = TypeVar("T")
Work = Callable[[AsyncConnection[DictRow]], Awaitable[T]]
Params = Sequence[Any] | dict[str, Any]

APPLICATION_NAME = "mcp-runtime"


def _lost_connection(exc: psycopg.Error) -> bool:
    """A failure that says nothing about the statement: the connection broke or the server is
    shutting down (SQLSTATE class 08, 57P01-57P03). A pool timeout already waited its time."""
    if isinstance(exc, PoolTimeout):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in {"57P01", "57P02", "57P03"}


def connection_options(conninfo: str, password: str | None, timeout_ms: int) -> dict[str, Any]:
    """Autocommit connections with dict rows, the password aside from the conninfo, and the
    time bounds (and application name) the URL did not set itself."""
    given = conninfo_to_dict(conninfo)
    options: dict[str, Any] = {"autocommit": True, "row_factory": dict_row}
    defaults = {
        "application_name": APPLICATION_NAME,
        "connect_timeout": max(2, -(-timeout_ms // 1000)),  # libpq: whole seconds, at least 2
        "tcp_user_timeout": timeout_ms,  # a write the server never acknowledges fails, not hangs
    }
    options.update({name: value for name, value in defaults.items() if name not in given})
    if password:
        options["password"] = password
    return options


async def _why_not(conninfo: str, password: str | None, timeout_ms: int) -> psycopg.Error | None:
    """The reason one connection attempt fails (the pool only logs its attempts' reasons: a
    refused password or certificate would otherwise read as a timeout); None if it succeeds."""
    try:
        connection = await AsyncConnection.connect(
            conninfo, **connection_options(conninfo, password, timeout_ms)
        )
    except psycopg.Error as exc:
        return exc
    await connection.close()
    return None


class PostgresPool:
    """The pool one store uses; `run()` work on a connection, typed errors out."""

    def __init__(self, pool: AsyncConnectionPool, password: str | None, timeout_s: float) -> None:
        self._pool = pool
        self._secrets = (password,) if password else ()
        self.timeout_s = timeout_s
        self.closed = False

    @classmethod
    async def open(
        cls, conninfo: str, password: str | None, *, min_size: int, max_size: int, timeout_ms: int
    ) -> PostgresPool:
        """Open with `min_size` connections made; StoreUnavailableError when they cannot be."""
        timeout_s = timeout_ms / 1000
        pool = AsyncConnectionPool(
            conninfo,
            kwargs=connection_options(conninfo, password, timeout_ms),
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            name="durable-store",
            open=False,
        )
        opened = cls(pool, password, timeout_s)
        try:
            await pool.open(wait=True, timeout=timeout_s)
        except PoolTimeout as exc:
            await pool.close()
            raise opened.unavailable(await _why_not(conninfo, password, timeout_ms) or exc) from None
        return opened

    def unavailable(self, exc: BaseException) -> StoreUnavailableError:
        text = str(exc)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return StoreUnavailableError(
            f"PostgreSQL durable store is unavailable: {text}",
            hint="Check MCP_RUNTIME_DURABLE_URL names a reachable server and database, and the "
            "credentials (MCP_RUNTIME_DURABLE_PASSWORD / PGPASSWORD) and TLS options are right.",
        )

    async def run(self, work: Work[T], *, retry: bool = True) -> T:
        """Run `work` on a pooled connection; once more on a fresh one if the connection was lost."""
        if self.closed:
            raise self.unavailable(RuntimeError("the store was closed"))
        for attempt in (1, 2):
            try:
                async with self._pool.connection() as connection:
                    return await work(connection)
            except psycopg.DataError as exc:
                raise InvalidArgumentError(
                    f"PostgreSQL durable store refused a value: {exc}",
                    hint="Text and JSON values stored durably cannot contain NUL characters.",
                ) from None
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if retry and attempt == 1 and _lost_connection(exc) and not self.closed:
                    continue
                raise self.unavailable(exc) from None
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def execute(self, sql: str, params: Params) -> int:
        """Run one statement; how many rows it changed."""

        async def work(connection: AsyncConnection[DictRow]) -> int:
            return (await connection.execute(sql, params)).rowcount

        return await self.run(work)

    async def fetch_all(self, sql: str, params: Params) -> list[DictRow]:
        async def work(connection: AsyncConnection[DictRow]) -> list[DictRow]:
            return await (await connection.execute(sql, params)).fetchall()

        return await self.run(work)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self._pool.close()
