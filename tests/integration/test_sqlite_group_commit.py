"""The SQLite store commits concurrent writes together: one IMMEDIATE transaction for the writes
queued while another is in flight, each caller still learning its own outcome.

A second plain sqlite3 connection on the same file plays another process: holding the write
lock keeps the store's transaction waiting, and a trigger makes chosen rows fail as a broken
statement would."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runtime_core.errors import ConflictError, StoreUnavailableError
from runtime_core.storage import (
    SQLITE_FILE_NAME,
    LedgerEntry,
    SqliteDurableStore,
    TerminalSnapshot,
    TraceSpan,
)
from runtime_core.storage._sqlite_commits import CHECKPOINT_EVERY

TENANT = "tenant-a"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
BATCH = 5


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteDurableStore]:
    opened = await SqliteDurableStore.open(tmp_path / SQLITE_FILE_NAME, busy_timeout_ms=60_000)
    yield opened
    await opened.close()


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding the file's write lock until the block ends (then committed)."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield other
        other.execute("COMMIT")
    finally:
        other.close()


def _batch(name: str, size: int = BATCH) -> list[LedgerEntry]:
    return [LedgerEntry(tenant_id=TENANT, event=name, recorded_at=T0, sequence=i) for i in range(size)]


def _span(index: int) -> TraceSpan:
    return TraceSpan(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id=f"{index + 1:016x}",
        tenant_id=TENANT,
        execution_id="exec_spans",
        name="step.s",
        start_ns=index,
        end_ns=index + 1,
        status="OK",
    )


def _snapshot(execution_id: str) -> TerminalSnapshot:
    return TerminalSnapshot(
        execution_id=execution_id,
        tenant_id=TENANT,
        pipeline_name="p",
        pipeline_version="1",
        status="Completed",
        snapshot={},
        fingerprint="f" * 64,
        created_at=T0,
    )


async def _events(store: SqliteDurableStore) -> Counter[str]:
    return Counter(entry.event for entry in await store.list_ledger(TENANT, limit=100_000))


async def test_writes_made_together_share_one_transaction_and_each_lands_once(
    store: SqliteDurableStore,
) -> None:
    before = store.write_transactions
    results = await asyncio.gather(
        *(store.append_ledger(_batch(f"batch{i}")) for i in range(10)),
        store.put_spans([_span(i) for i in range(3)]),
        store.put_payload("pl_1", TENANT, "exec_1", "s", b"body", "text/plain"),
        store.put_snapshot(_snapshot("exec_1")),
        store.put_snapshot(_snapshot("exec_1")),
    )
    # Every write was queued before the committing task first ran: one transaction for all.
    assert store.write_transactions - before == 1
    assert results[-2:] == [True, False]  # each snapshot writer learns its own outcome
    assert await _events(store) == {f"batch{i}": BATCH for i in range(10)}
    assert len(await store.list_spans(TENANT, "exec_spans")) == 3
    assert await store.get_payload("pl_1", TENANT) == b"body"


async def test_writes_queued_while_a_transaction_waits_go_together_in_the_next(
    store: SqliteDurableStore,
) -> None:
    before = store.write_transactions
    with write_lock_held(store.path):
        first = asyncio.create_task(store.append_ledger(_batch("first")))
        for _ in range(3):
            await asyncio.sleep(0)  # scheduling points for the first write to start, not a wait
        later = [asyncio.create_task(store.append_ledger(_batch(f"later{i}"))) for i in range(20)]
        for _ in range(3):
            await asyncio.sleep(0)
        assert not first.done() and not any(task.done() for task in later)
    await asyncio.gather(first, *later)
    assert store.write_transactions - before <= 2
    assert await _events(store) == {"first": BATCH} | {f"later{i}": BATCH for i in range(20)}


async def test_a_failing_write_gets_its_own_error_and_the_others_rows_all_land(
    store: SqliteDurableStore,
) -> None:
    with sqlite3.connect(store.path) as other:
        other.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON ledger WHEN NEW.event = 'poison' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned row'); END"
        )
    await store.put_payload("pl_foreign", "tenant-b", "exec_b", "s", b"theirs", "text/plain")
    poisoned = [*_batch("poisoned-batch", 3), LedgerEntry(tenant_id=TENANT, event="poison")]
    outcomes = await asyncio.gather(
        store.append_ledger(_batch("good0")),
        store.append_ledger(poisoned),
        store.put_payload("pl_1", TENANT, "exec_1", "s", b"mine", "text/plain"),
        store.put_payload("pl_foreign", TENANT, "exec_1", "s", b"taken over?", "text/plain"),
        store.append_ledger(_batch("good1")),
        store.put_snapshot(_snapshot("exec_1")),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], sqlite3.IntegrityError) and "poisoned row" in str(outcomes[1])
    assert isinstance(outcomes[3], ConflictError)
    assert outcomes[0] is None and outcomes[4] is None and outcomes[5] is True
    # The failing batch is all or nothing; every other write landed exactly once.
    assert await _events(store) == {"good0": BATCH, "good1": BATCH}
    assert await store.get_payload("pl_1", TENANT) == b"mine"
    assert await store.get_payload("pl_foreign", "tenant-b") == b"theirs"
    assert await store.get_snapshot("exec_1", TENANT) == _snapshot("exec_1")


async def test_a_transaction_that_cannot_begin_fails_every_write_and_the_store_recovers(
    tmp_path: Path,
) -> None:
    store = await SqliteDurableStore.open(tmp_path / SQLITE_FILE_NAME, busy_timeout_ms=50)
    try:
        with write_lock_held(store.path):
            outcomes = await asyncio.gather(
                *(store.append_ledger(_batch(f"busy{i}")) for i in range(3)), return_exceptions=True
            )
        assert all(isinstance(outcome, StoreUnavailableError) for outcome in outcomes)
        await store.append_ledger(_batch("after"))
        assert await _events(store) == {"after": BATCH}
    finally:
        await store.close()


async def test_a_cancelled_writer_still_lands_once_and_leaves_no_transaction_open(
    store: SqliteDurableStore,
) -> None:
    with write_lock_held(store.path):
        first = asyncio.create_task(store.append_ledger(_batch("first")))
        for _ in range(3):
            await asyncio.sleep(0)  # scheduling points, not a wait for an outcome
        cancelled = asyncio.create_task(store.append_ledger(_batch("cancelled")))
        kept = asyncio.create_task(store.append_ledger(_batch("kept")))
        await asyncio.sleep(0)
        cancelled.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cancelled
        assert cancelled.cancelled()
    await asyncio.gather(first, kept)
    await store.append_ledger(_batch("after"))
    # The cancelled caller stopped waiting, not its write; the connection is outside any
    # transaction: another connection takes the write lock at once.
    with sqlite3.connect(store.path, isolation_level=None, timeout=0) as other:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    assert await _events(store) == {"first": BATCH, "cancelled": BATCH, "kept": BATCH, "after": BATCH}


async def test_closing_commits_the_writes_of_cancelled_callers_first(tmp_path: Path) -> None:
    path = tmp_path / SQLITE_FILE_NAME
    store = await SqliteDurableStore.open(path)
    writes = [asyncio.create_task(store.append_ledger(_batch(f"w{i}"))) for i in range(5)]
    await asyncio.sleep(0)  # the writes are queued
    for write in writes:
        write.cancel()
    await store.close()
    reopened = await SqliteDurableStore.open(path)
    try:
        assert await _events(reopened) == {f"w{i}": BATCH for i in range(5)}
    finally:
        await reopened.close()


async def test_writes_committed_without_waiting_keep_the_wal_checkpointed(store: SqliteDurableStore) -> None:
    wal = store.path.with_name(f"{store.path.name}-wal")
    sizes = []
    for rounds in range(3):
        for i in range(CHECKPOINT_EVERY):
            await store.put_payload(f"pl_{rounds}_{i}", TENANT, "exec_1", "s", b"x" * 4096, "text/plain")
        sizes.append(wal.stat().st_size)
    # Uncontended, every write committed on the loop's connection, which never checkpoints: the
    # thread's connection did, so the log was restarted instead of growing with every write.
    assert sizes[2] < 1.5 * sizes[0]
    assert await store.get_payload(f"pl_2_{CHECKPOINT_EVERY - 1}", TENANT) == b"x" * 4096


def test_a_store_opened_on_one_thread_writes_and_closes_on_another(tmp_path: Path) -> None:
    path = tmp_path / SQLITE_FILE_NAME
    store = asyncio.run(SqliteDurableStore.open(path))  # its loop's connection belongs to this thread

    async def elsewhere() -> Counter[str]:
        await store.append_ledger(_batch("moved"))  # not on the opening thread: the store's thread commits it
        events = await _events(store)
        await store.close()
        return events

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as other:
        assert other.submit(asyncio.run, elsewhere()).result(timeout=60) == {"moved": BATCH}
