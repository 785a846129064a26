"""What is particular to the PostgreSQL durable store, against the real server on 127.0.0.1:5432:
versioned migrations under an advisory lock (several processes starting at once migrate once;
code older than the database refuses to start), an index for every query, bulk batches, the
bounded readiness probe, surviving lost connections, and bad values or an unreachable server
answered with typed errors that never carry the password. Each test makes its own database.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import psycopg
import pytest

from runtime_core.errors import InvalidArgumentError, StoreUnavailableError
from runtime_core.hot_state import find_free_port
from runtime_core.storage import (
    MIGRATIONS,
    ArchivedStep,
    DurableRecordKind,
    DurableStoreSettings,
    ForensicsRecord,
    LedgerEntry,
    Migration,
    PostgresDurableStore,
    RunIndexEvent,
    RunRecord,
    RunRecordCursor,
    RunRecordQuery,
    ScheduleFire,
    ScheduleRecord,
    SchemaVersionError,
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
    open_durable_store,
    utc_now,
)
from runtime_core.storage._postgres_migrate import SCHEMA_LOCK_KEY
from tests.helpers import wait_until
from tests.postgres import ADMIN_CONNINFO, conninfo_of, database_url, scratch_database

TENANT = "tenant-a"
SECRET = "never-Print-this-9d2f"
CONCURRENT_STARTS = 4


@pytest.fixture
def database(postgres_server: None) -> Iterator[str]:
    with scratch_database("mcprt_pgstore") as name:
        yield name


async def _open(name: str, **params: str) -> PostgresDurableStore:
    store = await open_durable_store(DurableStoreSettings.from_url(database_url(name, **params)))
    assert isinstance(store, PostgresDurableStore)
    return store


@pytest.fixture
async def store(database: str) -> AsyncIterator[PostgresDurableStore]:
    opened = await _open(database)
    yield opened
    await opened.close()


async def _rows(name: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(conninfo_of(name), autocommit=True) as db:
        return await (await db.execute(sql, params)).fetchall()


async def _store_backends(name: str) -> int:
    """Connections the stores under test hold to database `name`."""
    async with await psycopg.AsyncConnection.connect(ADMIN_CONNINFO, autocommit=True) as db:
        cursor = await db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'mcp-runtime'",
            (name,),
        )
        return int((await cursor.fetchone() or (0,))[0])


# Migrations


async def test_a_new_database_is_migrated_once_and_reopening_applies_nothing(database: str) -> None:
    first = await _open(database)
    second = await _open(database)
    try:
        assert first.applied_migrations == [m.version for m in MIGRATIONS]
        assert second.applied_migrations == []
        rows = await _rows(database, "SELECT version, checksum FROM schema_migrations ORDER BY version")
        assert rows == [(m.version, m.checksum) for m in MIGRATIONS]
    finally:
        await first.close()
        await second.close()


_START_ONE_PROCESS = """
import asyncio, json
from runtime_core.storage import DurableStoreSettings, open_durable_store

async def main():
    store = await open_durable_store(DurableStoreSettings.from_env())
    print(json.dumps(store.applied_migrations), flush=True)
    await store.close()

asyncio.run(main())
"""


async def test_processes_starting_at_once_migrate_once(database: str) -> None:
    """The test holds the schema lock until every process waits on it, then lets them race."""
    env = {"MCP_RUNTIME_DURABLE_URL": database_url(database), "PATH": ""}
    async with await psycopg.AsyncConnection.connect(conninfo_of(database), autocommit=True) as holder:
        await holder.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
        processes = [
            await asyncio.create_subprocess_exec(
                sys.executable, "-c", _START_ONE_PROCESS, env=env, stdout=asyncio.subprocess.PIPE
            )
            for _ in range(CONCURRENT_STARTS)
        ]
        try:

            async def all_wait_on_the_lock() -> bool:
                waiting = await _rows(
                    database,
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                )
                return waiting[0][0] == CONCURRENT_STARTS

            await wait_until(all_wait_on_the_lock, timeout=60, interval=0.05)
            await holder.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))
            outputs = [await asyncio.wait_for(p.communicate(), timeout=60) for p in processes]
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    assert [p.returncode for p in processes] == [0] * CONCURRENT_STARTS
    applied = sorted(json.loads(out) for out, _ in outputs)
    assert applied == [[]] * (CONCURRENT_STARTS - 1) + [[m.version for m in MIGRATIONS]]
    rows = await _rows(database, "SELECT version FROM schema_migrations ORDER BY version")
    assert rows == [(m.version,) for m in MIGRATIONS]


async def test_a_new_migration_is_applied_forward_and_older_code_then_refuses_to_start(database: str) -> None:
    await (await _open(database)).close()
    added = Migration(len(MIGRATIONS) + 1, "test: a column", "ALTER TABLE ledger ADD COLUMN note text")
    newer = await PostgresDurableStore.open(conninfo_of(database), migrations=(*MIGRATIONS, added))
    await newer.close()
    assert newer.applied_migrations == [added.version]

    with pytest.raises(
        SchemaVersionError, match=f"schema version {added.version}, newer than this code"
    ) as raised:
        await _open(database)
    assert raised.value.code == "durable_schema_mismatch"
    assert "Upgrade mcp-runtime" in (raised.value.hint or "")
    assert await _store_backends(database) == 0  # the refused store closed its pool


async def test_an_applied_migration_that_was_edited_is_refused(database: str) -> None:
    await (await _open(database)).close()
    edited = Migration(1, MIGRATIONS[0].description, MIGRATIONS[0].sql + "\n-- edited")
    with pytest.raises(SchemaVersionError, match="differs from the one applied"):
        await PostgresDurableStore.open(conninfo_of(database), migrations=(edited, *MIGRATIONS[1:]))


# Indexes


async def _use_every_query(store: PostgresDurableStore) -> None:
    """Every query the store makes, each filter combination, on a few rows."""
    at = utc_now()
    await store.put_snapshot(
        TerminalSnapshot(
            execution_id="exec_1", tenant_id=TENANT, pipeline_name="p", pipeline_version="1",
            status="Completed", snapshot={}, fingerprint="f", created_at=at - timedelta(days=9),
        )
    )  # fmt: skip
    await store.get_snapshot("exec_1", TENANT)
    await store.put_payload("pl_1", TENANT, "exec_1", "s", b"x", "text/plain")
    await store.get_payload("pl_1", TENANT)
    await store.archive_step(ArchivedStep(execution_id="exec_1", tenant_id=TENANT, step_name="s", status="C"))
    await store.get_archived_step("exec_1", "s", TENANT)
    await store.list_archived_steps("exec_1", TENANT)
    await store.append_ledger(
        [LedgerEntry(tenant_id=TENANT, event="e", execution_id="exec_1", shared_run_id="r")]
    )
    for ids in ({}, {"execution_id": "exec_1"}, {"shared_run_id": "r"}):
        await store.list_ledger(TENANT, **ids)
    await store.has_ledger_event(TENANT, "exec_1", "e")
    span = TraceSpan(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736", span_id="00f067aa0ba902b7", tenant_id=TENANT,
        execution_id="exec_1", name="n", start_ns=1, end_ns=2, status="OK",
    )  # fmt: skip
    await store.put_spans([span])
    await store.list_spans(TENANT, "exec_1")
    await store.has_span(TENANT, span.trace_id, span.span_id)
    await store.put_forensics(
        ForensicsRecord(tenant_id=TENANT, runtime_instance_id="rt", kind="k", action="a")
    )
    for ids in ({}, {"runtime_instance_id": "rt"}, {"execution_id": "exec_1"}):
        await store.list_forensics(TENANT, **ids)
    await store.append_run_index_event(RunIndexEvent(tenant_id=TENANT, shared_run_id="r", status="Queued"))
    for ids in ({}, {"shared_run_id": "r"}, {"execution_id": "exec_1"}):
        await store.list_run_index_history(TENANT, **ids)
    record = RunRecord(
        shared_run_id="r", tenant_id=TENANT, local_run_id="l", execution_id="exec_1", pipeline_name="p",
        pipeline_version="1", submitted_by="u", submit_mode="QueueFirst", status="Completed",
        shared_status="Dispatched", snapshot={}, created_at=at, ended_at=at,
    )  # fmt: skip
    await store.put_run_record(record)
    for ids in ({}, {"shared_run_id": "r"}, {"local_run_id": "l"}, {"execution_id": "exec_1"}):
        await store.find_run_record(TENANT, **ids)
    cursor = RunRecordCursor(created_at=at, shared_run_id="s")
    for query in (
        RunRecordQuery(),
        RunRecordQuery(status="Completed", created_after=at - timedelta(1), before=cursor),
    ):
        await store.list_run_records(TENANT, query)
    await store.put_submitted_run(SubmittedRun(shared_run_id="r", tenant_id=TENANT, run={}))
    await store.list_submitted_runs()
    await store.list_submitted_runs(after="a")
    await store.delete_submitted_run(TENANT, "r")
    for kind in DurableRecordKind:
        await store.purge(kind, at - timedelta(days=1))
    await store.delete_payloads_for_execution("exec_1", TENANT)
    schedule = ScheduleRecord(
        schedule_id="sched_1", tenant_id=TENANT, name="n", spec={}, pipeline={}, snapshot={}
    )
    await store.insert_schedule(schedule)
    await store.get_schedule(TENANT, "sched_1")
    await store.list_schedules(TENANT, after_name="a")
    await store.list_active_schedules(after="sched_0")
    await store.set_schedule_status(TENANT, "sched_1", "paused", at)
    await store.record_schedule_fire(TENANT, "sched_1", ScheduleFire(tick_at=at, outcome="fired"))
    await store.delete_schedule(TENANT, "sched_1")
    await store.probe_write()
    await store.health()


async def test_every_query_the_store_makes_is_served_by_an_index(database: str) -> None:
    """With sequential scans disabled the planner still picks one where no index serves a query:
    the table statistics, after every backend of the store exited, count none."""
    await (await _open(database)).close()
    await _rows(database, "SELECT pg_stat_reset()")
    store = await _open(database, options="-c%20enable_seqscan%3Doff")
    try:
        await _use_every_query(store)
    finally:
        await store.close()

    async def store_backends_gone() -> bool:  # a backend reports its statistics as it exits
        return await _store_backends(database) == 0

    await wait_until(store_backends_gone, timeout=10, interval=0.02)
    scans = await _rows(
        database,
        "SELECT relname, seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables "
        "WHERE relname <> 'schema_migrations' ORDER BY relname",
    )
    assert len(scans) == 11
    assert [(table, seq) for table, seq, _ in scans if seq] == []
    assert [table for table, _, idx in scans if not idx and table != "health_probes"] == []


# Batches


async def test_a_batch_is_stored_in_its_order_and_its_own_duplicates_once(
    store: PostgresDurableStore,
) -> None:
    entries = [LedgerEntry(tenant_id=TENANT, event=f"e{n}", sequence=0) for n in range(2_000)]
    at = entries[0].recorded_at
    entries = [e.model_copy(update={"recorded_at": at}) for e in entries]
    await store.append_ledger([*entries, entries[0], entries[1]])
    listed = await store.list_ledger(TENANT, limit=5_000)
    assert [e.event for e in listed] == [e.event for e in entries]  # same time: insertion order


# Readiness


async def test_the_readiness_probe_is_bounded_and_never_stacks_while_writes_hang(database: str) -> None:
    store = await open_durable_store(
        DurableStoreSettings.from_url(database_url(database), postgresql_timeout_ms=300)
    )
    try:
        async with await psycopg.AsyncConnection.connect(conninfo_of(database)) as locker:
            await locker.execute("LOCK TABLE health_probes IN ACCESS EXCLUSIVE MODE")
            for _ in range(3):
                with pytest.raises(StoreUnavailableError, match=r"no write acknowledged within 0\.3 s"):
                    await store.probe_write()
            waiting = await _rows(
                database,
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mcp-runtime' "
                "AND wait_event_type = 'Lock' AND datname = current_database()",
            )
            assert waiting == [(1,)]
            await locker.rollback()
        await store.probe_write()
    finally:
        await store.close()


# Connections


async def test_connections_lost_under_the_store_cost_no_error(
    store: PostgresDurableStore, database: str
) -> None:
    await store.append_ledger([LedgerEntry(tenant_id=TENANT, event="before")])
    async with await psycopg.AsyncConnection.connect(ADMIN_CONNINFO, autocommit=True) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = 'mcp-runtime'",
            (database,),
        )
    await store.append_ledger([LedgerEntry(tenant_id=TENANT, event="after")])
    assert [e.event for e in await store.list_ledger(TENANT)] == ["before", "after"]


async def test_a_nul_character_is_a_typed_error_and_changes_nothing(store: PostgresDurableStore) -> None:
    good = LedgerEntry(tenant_id=TENANT, event="kept")
    for bad in (
        LedgerEntry(tenant_id=TENANT, event="nul\x00"),
        LedgerEntry(tenant_id=TENANT, event="e", attributes={"x": "a\x00"}),
    ):
        with pytest.raises(InvalidArgumentError, match="NUL"):
            await store.append_ledger([good, bad])
    assert await store.list_ledger(TENANT) == []
    await store.append_ledger([good])
    assert await store.list_ledger(TENANT) == [good]


async def test_an_unreachable_server_is_a_typed_error_that_never_shows_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"postgresql://app@127.0.0.1:{find_free_port()}/runtime"
    settings = DurableStoreSettings.from_url(url, password=SECRET, postgresql_timeout_ms=300)
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailableError) as raised:
        await open_durable_store(settings)
    assert "unavailable" in str(raised.value)
    assert SECRET not in str(raised.value) and SECRET not in repr(raised.value.to_dict())
    assert not [r for r in caplog.records if SECRET in r.getMessage()]
