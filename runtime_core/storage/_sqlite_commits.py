"""GroupCommit: the writes of one SQLite store, committed together while others are in flight.

Owns the queue of writes and the one task that commits them: a write waits while a transaction
is in flight, and every write queued meanwhile goes in the next single IMMEDIATE transaction,
run whole in one call on the connection's thread (so a cancelled caller can never leave the
shared connection inside a transaction; its write still lands). Each write learns its own
outcome: how many rows its statements changed, or its own error. A write whose statement fails
rolls its group back and every member then runs alone, so one bad write neither fails nor
loses another's rows; a transaction that cannot begin or commit (the file busy past the
timeout, a disk error) fails every member with that error. Must not know about tables or
records beyond the statements it is handed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from contextlib import suppress
from functools import partial
from typing import Any

from runtime_core.storage._sqlite_thread import SqliteThread

Params = Sequence[Any] | dict[str, Any]
Statements = Sequence[tuple[str, Sequence[Params]]]
"""One write: statements, each run over its rows, all committed or none."""
Outcome = int | Exception


def _rollback(connection: sqlite3.Connection) -> None:
    # Fails harmlessly when SQLite already rolled the transaction back (a disk or busy error).
    with suppress(sqlite3.Error):
        connection.execute("ROLLBACK")


class _Committer:
    """The side of GroupCommit that runs on the connection's thread."""

    def __init__(self) -> None:
        self.commits = 0

    def commit(self, connection: sqlite3.Connection, writes: list[Statements]) -> list[Outcome]:
        """Every write in one IMMEDIATE transaction; each alone if one of them fails."""
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return [exc] * len(writes)
        try:
            changed: list[Outcome] = [self._run(connection, write) for write in writes]
        except Exception as exc:
            _rollback(connection)
            if len(writes) == 1:
                return [exc]
            return [self.commit(connection, [write])[0] for write in writes]
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(connection)
            return [exc] * len(writes)
        self.commits += 1
        return changed

    @staticmethod
    def _run(connection: sqlite3.Connection, write: Statements) -> int:
        return sum(connection.executemany(sql, rows).rowcount for sql, rows in write)


class GroupCommit:
    """Writes queued while a transaction is in flight share the next one."""

    def __init__(self, thread: SqliteThread) -> None:
        self._thread = thread
        self._committer = _Committer()
        self._queued: list[tuple[Statements, asyncio.Future[int]]] = []
        self._flusher: asyncio.Task[None] | None = None

    @property
    def transactions(self) -> int:
        """How many write transactions committed (a group counts once)."""
        return self._committer.commits

    async def write(self, statements: Statements) -> int:
        """Commit `statements` (with the writes queued alongside); how many rows they changed.
        A cancelled caller stops waiting, not the write."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queued.append((statements, future))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def drain(self) -> None:
        """Return once every write queued so far is committed or failed."""
        if self._flusher is not None:
            await asyncio.shield(self._flusher)

    async def _flush(self) -> None:
        try:
            while self._queued:
                group, self._queued = self._queued, []
                writes = [statements for statements, _ in group]
                try:
                    outcomes = await self._thread.call(partial(self._committer.commit, writes=writes))
                except asyncio.CancelledError:
                    for _, future in [*group, *self._queued]:
                        future.cancel()
                    raise
                except Exception as exc:  # the thread is gone: no write of the group ran
                    outcomes = [exc] * len(group)
                for (_, future), outcome in zip(group, outcomes, strict=True):
                    if future.done():  # its caller was cancelled; the write went all the same
                        continue
                    if isinstance(outcome, Exception):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
        finally:
            self._flusher = None
