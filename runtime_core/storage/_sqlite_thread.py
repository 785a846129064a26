"""SqliteThread: the one sqlite3 connection of a SQLite store and the thread it lives on.

Owns that thread and the connection (opened, used and closed only there, in autocommit mode
with rows readable by column name): `call(work)` runs a function of the connection on the
thread in one hop and hands back its result or exception, so a whole transaction runs in one
call and no await can interrupt it between BEGIN and COMMIT. A call cancelled before it starts
never runs; one that started runs to its end. Must not know about tables, queries or when
statements are grouped.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]


class SqliteThread:
    """One sqlite3 connection, used only on its own thread."""

    def __init__(self, executor: ThreadPoolExecutor, connection: sqlite3.Connection) -> None:
        self._executor = executor
        self._connection = connection

    @classmethod
    async def open(cls, path: Path, prepare: Callable[[sqlite3.Connection], None]) -> SqliteThread:
        """Connect to `path` on a new thread and `prepare` the connection there; sqlite3.Error
        (or OSError) if either fails, the thread then stopped."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")

        def connect() -> sqlite3.Connection:
            connection = sqlite3.connect(path, isolation_level=None)
            try:
                connection.row_factory = sqlite3.Row
                prepare(connection)
            except BaseException:
                connection.close()
                raise
            return connection

        try:
            connection = await asyncio.get_running_loop().run_in_executor(executor, connect)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(executor, connection)

    async def call(self, work: Work[T]) -> T:
        """`work(connection)` on the connection's thread: its result, or its exception."""
        connection = self._connection
        return await asyncio.get_running_loop().run_in_executor(self._executor, work, connection)

    async def close(self) -> None:
        """Close the connection after the calls already queued, then let the thread end."""
        with suppress(sqlite3.Error):
            await self.call(sqlite3.Connection.close)
        self._executor.shutdown(wait=False)
