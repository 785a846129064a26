"""GroupCommit: the writes of one SQLite store, committed together while others are in flight.

Owns the queue of writes and the one task that commits them: a write waits while a transaction
is in flight, and every write queued meanwhile goes in the next single IMMEDIATE transaction,
run whole in one call (so a cancelled caller can never leave a connection inside a
transaction; its write still lands). A group first goes on the event loop's own write
connection, which never waits for a lock: when the file is free it commits there at once,
without a hop to the connection's thread (whose GIL hand-offs cost the loop more than the
commit on a busy machine); when that transaction cannot begin (another process holds the
write lock), or any of its writes fails, it is rolled back whole and the group goes to the
connection's thread, which waits for the lock (busy timeout) and isolates a failing write
there. Each write learns its own outcome: how many rows its statements changed, or its own
error. A write whose statement fails rolls its group back and every member then runs alone,
so one bad write neither fails nor loses another's rows; a transaction that cannot begin or
commit (the file busy past the timeout, a disk error) fails every member with that error.
The loop's connection never checkpoints the WAL (that may sync the disk): every
CHECKPOINT_EVERY of its commits, the thread's connection checkpoints it (PASSIVE: other
processes' readers and writers are not blocked). Must not know about tables or records beyond
the statements it is handed.
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


CHECKPOINT_EVERY = 200
"""Commits on the loop's connection between two WAL checkpoints on the thread's connection."""


def _rollback(connection: sqlite3.Connection) -> None:
    # Fails harmlessly when SQLite already rolled the transaction back (a disk or busy error).
    with suppress(sqlite3.Error):
        connection.execute("ROLLBACK")


def _checkpoint(connection: sqlite3.Connection) -> None:
    with suppress(sqlite3.Error):  # a busy checkpoint is skipped: the next one copies its frames
        connection.execute("PRAGMA wal_checkpoint(PASSIVE)")


class _Committer:
    """Commits a group of writes on a connection (the thread's, or the loop's that never waits)."""

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

    def commit_at_once(self, connection: sqlite3.Connection, writes: list[Statements]) -> list[int] | None:
        """Every write in one IMMEDIATE transaction on a connection that never waits for a lock;
        None (nothing written) when it cannot begin or any part fails."""
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:
            return None
        try:
            changed = [self._run(connection, write) for write in writes]
            connection.execute("COMMIT")
        except Exception:
            _rollback(connection)
            return None
        self.commits += 1
        return changed

    @staticmethod
    def _run(connection: sqlite3.Connection, write: Statements) -> int:
        return sum(connection.executemany(sql, rows).rowcount for sql, rows in write)


class GroupCommit:
    """Writes queued while a transaction is in flight share the next one."""

    def __init__(self, thread: SqliteThread, at_once: sqlite3.Connection) -> None:
        """`at_once`: the loop's write connection (opened on the loop, busy timeout 0, WAL
        autocheckpoint off); closed by `close`."""
        self._thread = thread
        self._at_once = at_once
        self._since_checkpoint = 0
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

    def close(self) -> None:
        """Close the loop's connection (after `drain`). A store closed from another thread than
        the one that opened it leaves it to be closed when it is collected."""
        with suppress(sqlite3.Error):
            self._at_once.close()

    async def _flush(self) -> None:
        try:
            while self._queued:
                group, self._queued = self._queued, []
                await self._commit(group)
        except asyncio.CancelledError:
            for _, future in self._queued:
                future.cancel()
            raise
        finally:
            self._flusher = None

    async def _commit(self, group: list[tuple[Statements, asyncio.Future[int]]]) -> None:
        writes = [statements for statements, _ in group]
        committed = self._committer.commit_at_once(self._at_once, writes)
        if committed is not None:
            _settle(group, committed)
            if self._counted_commit():
                # The writes queued meanwhile wait for it (and then go together).
                with suppress(Exception):  # the thread is gone: the store is closing
                    await self._thread.call(_checkpoint)
            return
        try:
            outcomes = await self._thread.call(partial(self._committer.commit, writes=writes))
        except asyncio.CancelledError:
            for _, future in group:
                future.cancel()
            raise
        except Exception as exc:  # the thread is gone: no write of the group ran
            outcomes = [exc] * len(group)
        _settle(group, outcomes)

    def _counted_commit(self) -> bool:
        """Count a commit on the loop's connection; True when the WAL is due a checkpoint."""
        self._since_checkpoint += 1
        if self._since_checkpoint < CHECKPOINT_EVERY:
            return False
        self._since_checkpoint = 0
        return True


def _settle(group: list[tuple[Statements, asyncio.Future[int]]], outcomes: Sequence[Outcome]) -> None:
    for (_, future), outcome in zip(group, outcomes, strict=True):
        if future.done():  # its caller was cancelled; the write went all the same
            continue
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
