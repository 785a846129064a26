"""One contract for every DurableStore backend: SQLite and PostgreSQL always, MongoDB when
MONGODB_URI is set.

PostgreSQL runs on the shared server (one scratch database for this module, emptied before each
test). The MongoDB run is reported as skipped (never as passed) when MONGODB_URI is absent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError
from pymongo import AsyncMongoClient

from runtime_core.errors import ConfigurationError, ConflictError, StoreUnavailableError
from runtime_core.hot_state import find_free_port
from runtime_core.storage import (
    SQLITE_FILE_NAME,
    ArchivedStep,
    DurableRecordKind,
    DurableStore,
    DurableStoreSettings,
    ForensicsRecord,
    LedgerEntry,
    PayloadCorruptedError,
    RunIndexEvent,
    RunRecord,
    RunRecordCursor,
    RunRecordQuery,
    RunRecordStep,
    SqliteDurableStore,
    SubmittedRun,
    TerminalSnapshot,
    TraceSpan,
    open_durable_store,
)
from tests.durable_backends import SQL_BACKENDS, DurableBackend, sql_backend

TENANT = "tenant-a"
FOREIGN = "tenant-b"
T0 = datetime(2026, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)


async def _mongodb_backend(uri: str) -> AsyncIterator[DurableBackend]:
    database = f"mcprt_test_{secrets.token_hex(4)}"
    store = await open_durable_store(
        DurableStoreSettings(backend="mongodb", mongodb_uri=uri, mongodb_database=database)
    )
    admin: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(uri)

    async def damage(payload_id: str, body: bytes | None) -> None:
        payloads = admin[database]["payloads"]
        if body is None:
            await payloads.delete_one({"_id": payload_id})
        else:
            await payloads.update_one({"_id": payload_id}, {"$set": {"body": body}})

    async def damage_schedule(schedule_id: str, input_json: str) -> None:
        await admin[database]["schedules"].update_one(
            {"_id": schedule_id}, {"$set": {"input": json.loads(input_json)}}
        )

    yield DurableBackend("mongodb", store, damage, damage_schedule)
    await store.close()
    await admin.drop_database(database)
    await admin.close()


@pytest.fixture(params=["sqlite", "postgresql", "mongodb"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DurableBackend]:
    if request.param in SQL_BACKENDS:
        async with sql_backend(request, request.param, tmp_path) as opened:
            yield opened
        return
    uri = os.environ.get("MONGODB_URI")
    if not uri:
        pytest.skip("MONGODB_URI not set")
    async for opened in _mongodb_backend(uri):
        yield opened


@pytest.fixture
def store(backend: DurableBackend) -> DurableStore:
    return backend.store


def _snapshot(
    execution_id: str = "exec_1", tenant_id: str = TENANT, status: str = "Completed"
) -> TerminalSnapshot:
    return TerminalSnapshot(
        execution_id=execution_id,
        tenant_id=tenant_id,
        pipeline_name="rag",
        pipeline_version="1",
        status=status,
        snapshot={"steps": {"retrieve": {"status": "Completed", "result": {"docs": ["a", "b"]}}}},
        fingerprint="f" * 64,
        created_at=T0,
    )


def _ledger(event: str, *, at: datetime = T0, sequence: int = 0, **ids: str) -> LedgerEntry:
    return LedgerEntry(tenant_id=TENANT, event=event, recorded_at=at, sequence=sequence, **ids)


def _span(span_id: str, start_ns: int, parent: str | None = None, tenant_id: str = TENANT) -> TraceSpan:
    return TraceSpan(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id=span_id,
        parent_span_id=parent,
        tenant_id=tenant_id,
        execution_id="exec_1",
        step_name="retrieve",
        name="step.retrieve",
        start_ns=start_ns,
        end_ns=start_ns + 1_000,
        status="OK",
        attributes={"step.attempt": 1},
    )


# Terminal snapshots


async def test_snapshot_is_written_once(store: DurableStore) -> None:
    assert await store.put_snapshot(_snapshot(status="Completed")) is True
    assert await store.put_snapshot(_snapshot(status="Failed")) is False
    stored = await store.get_snapshot("exec_1", TENANT)
    assert stored == _snapshot(status="Completed")


async def test_missing_snapshot_is_none(store: DurableStore) -> None:
    assert await store.get_snapshot("exec_absent", TENANT) is None


# Tenant isolation


async def test_foreign_tenant_sees_nothing_of_any_record_kind(store: DurableStore) -> None:
    await store.put_snapshot(_snapshot())
    await store.put_payload("pl_1", TENANT, "exec_1", "retrieve", b"body", "application/json")
    await store.archive_step(
        ArchivedStep(execution_id="exec_1", tenant_id=TENANT, step_name="s", status="Completed")
    )
    await store.append_ledger([_ledger("submitted", execution_id="exec_1", shared_run_id="srun_1")])
    await store.put_spans([_span("00f067aa0ba902b7", 1)])
    await store.put_forensics(
        ForensicsRecord(
            tenant_id=TENANT, runtime_instance_id="rt_1", execution_id="exec_1", kind="k", action="a"
        )
    )
    await store.append_run_index_event(
        RunIndexEvent(tenant_id=TENANT, shared_run_id="srun_1", execution_id="exec_1", status="Running")
    )

    assert await store.get_snapshot("exec_1", FOREIGN) is None
    assert await store.get_payload("pl_1", FOREIGN) is None
    assert await store.delete_payloads_for_execution("exec_1", FOREIGN) == 0
    assert await store.get_archived_step("exec_1", "s", FOREIGN) is None
    assert await store.list_archived_steps("exec_1", FOREIGN) == []
    assert await store.list_ledger(FOREIGN) == []
    assert await store.list_ledger(FOREIGN, execution_id="exec_1", shared_run_id="srun_1") == []
    assert await store.list_spans(FOREIGN, "exec_1") == []
    assert await store.list_forensics(FOREIGN) == []
    assert await store.list_forensics(FOREIGN, runtime_instance_id="rt_1", execution_id="exec_1") == []
    assert await store.list_run_index_history(FOREIGN) == []
    assert await store.list_run_index_history(FOREIGN, shared_run_id="srun_1", execution_id="exec_1") == []


# Payloads


async def test_payload_round_trips_with_size_and_sha256(store: DurableStore) -> None:
    body = secrets.token_bytes(200_000)
    ref = await store.put_payload("pl_1", TENANT, "exec_1", "retrieve", body, "application/octet-stream")
    assert (ref.payload_id, ref.size, len(ref.sha256)) == ("pl_1", len(body), 64)
    assert await store.get_payload("pl_1", TENANT) == body


async def test_corrupted_payload_raises_payload_corrupted_error(backend: DurableBackend) -> None:
    ref = await backend.store.put_payload("pl_1", TENANT, "exec_1", "retrieve", b"original", "text/plain")
    await backend.damage_payload("pl_1", b"tampered")
    with pytest.raises(PayloadCorruptedError) as raised:
        await backend.store.get_payload("pl_1", TENANT)
    assert raised.value.payload_id == "pl_1"
    assert raised.value.expected_sha256 == ref.sha256


async def test_payload_id_owned_by_another_tenant_is_a_conflict(store: DurableStore) -> None:
    await store.put_payload("pl_1", TENANT, "exec_1", "retrieve", b"mine", "text/plain")
    with pytest.raises(ConflictError):
        await store.put_payload("pl_1", FOREIGN, "exec_9", "retrieve", b"theirs", "text/plain")
    assert await store.get_payload("pl_1", TENANT) == b"mine"


async def test_delete_payloads_for_execution_removes_only_that_execution(store: DurableStore) -> None:
    await store.put_payload("pl_1", TENANT, "exec_1", "a", b"1", "text/plain")
    await store.put_payload("pl_2", TENANT, "exec_1", "b", b"2", "text/plain")
    await store.put_payload("pl_3", TENANT, "exec_2", "a", b"3", "text/plain")
    assert await store.delete_payloads_for_execution("exec_1", TENANT) == 2
    assert await store.get_payload("pl_1", TENANT) is None
    assert await store.get_payload("pl_3", TENANT) == b"3"


# Archived steps


async def test_archived_step_keeps_payload_ref_or_inline_result(store: DurableStore) -> None:
    ref = await store.put_payload("pl_1", TENANT, "exec_1", "retrieve", b"big", "text/plain")
    by_ref = ArchivedStep(
        execution_id="exec_1", tenant_id=TENANT, step_name="retrieve", status="Completed", result_ref=ref
    )
    inline = ArchivedStep(
        execution_id="exec_1",
        tenant_id=TENANT,
        step_name="compose",
        status="Completed",
        result={"text": "hi"},
    )
    await store.archive_step(by_ref)
    await store.archive_step(inline)
    assert await store.get_archived_step("exec_1", "retrieve", TENANT) == by_ref
    assert await store.list_archived_steps("exec_1", TENANT) == [inline, by_ref]


async def test_archiving_a_step_again_replaces_it(store: DurableStore) -> None:
    first = ArchivedStep(
        execution_id="exec_1", tenant_id=TENANT, step_name="s", status="Running", archived_at=T0
    )
    later = first.model_copy(
        update={"status": "Completed", "retry_count": 2, "archived_at": T0 + timedelta(1)}
    )
    await store.archive_step(first)
    await store.archive_step(later)
    assert await store.list_archived_steps("exec_1", TENANT) == [later]


# Ledger


async def test_ledger_lists_by_recorded_at_then_sequence(store: DurableStore) -> None:
    later = _ledger("completed", at=T0 + timedelta(seconds=1))
    second = _ledger("claimed", sequence=2)
    first = _ledger("submitted", sequence=1)
    await store.append_ledger([later, second])
    await store.append_ledger([first])
    assert [e.event for e in await store.list_ledger(TENANT)] == ["submitted", "claimed", "completed"]


async def test_ledger_filters_by_execution_and_shared_run(store: DurableStore) -> None:
    await store.append_ledger(
        [
            _ledger("a", sequence=1, execution_id="exec_1", shared_run_id="srun_1"),
            _ledger("b", sequence=2, execution_id="exec_2", shared_run_id="srun_1"),
            _ledger("c", sequence=3, execution_id="exec_3", shared_run_id="srun_2"),
        ]
    )
    assert [e.event for e in await store.list_ledger(TENANT, execution_id="exec_1")] == ["a"]
    assert [e.event for e in await store.list_ledger(TENANT, shared_run_id="srun_1")] == ["a", "b"]
    assert [
        e.event for e in await store.list_ledger(TENANT, execution_id="exec_2", shared_run_id="srun_1")
    ] == ["b"]


async def test_ledger_limit_keeps_the_oldest_entries(store: DurableStore) -> None:
    await store.append_ledger([_ledger(f"e{i}", sequence=i) for i in range(5)])
    assert [e.event for e in await store.list_ledger(TENANT, limit=2)] == ["e0", "e1"]


async def test_ledger_append_ignores_an_entry_id_already_stored(store: DurableStore) -> None:
    entry = _ledger("submitted", execution_id="exec_1")
    await store.append_ledger([entry])
    await store.append_ledger([entry, _ledger("claimed", sequence=1)])
    assert [e.event for e in await store.list_ledger(TENANT)] == ["submitted", "claimed"]


async def test_ledger_round_trips_every_field(store: DurableStore) -> None:
    entry = LedgerEntry(
        tenant_id=TENANT,
        execution_id="exec_1",
        shared_run_id="srun_1",
        local_run_id="lrun_1",
        runtime_instance_id="rt_1",
        assigned_runtime_instance_id="rt_2",
        event="recovered",
        step_name="retrieve",
        attributes={"reason": "heartbeat lapsed", "nested": {"n": [1, 2.5, None, True]}},
        recorded_at=datetime(2026, 1, 2, 5, 4, 5, 123456, tzinfo=timezone(timedelta(hours=2))),
        sequence=7,
    )
    await store.append_ledger([entry])
    [stored] = await store.list_ledger(TENANT)
    assert stored == entry
    assert stored.recorded_at == T0
    assert stored.recorded_at.tzinfo == UTC


# Trace spans


async def test_spans_list_by_start_time_with_their_parent_links(store: DurableStore) -> None:
    root = _span("00f067aa0ba902b7", start_ns=1_000)
    child = _span("b7ad6b7169203331", start_ns=2_000, parent=root.span_id)
    await store.put_spans([child, root])
    await store.put_spans([root])
    assert await store.list_spans(TENANT, "exec_1") == [root, child]


# Forensics


async def test_forensics_filter_by_runtime_instance_and_execution(store: DurableStore) -> None:
    in_flight = ForensicsRecord(
        tenant_id=TENANT,
        runtime_instance_id="rt_dead",
        execution_id="exec_1",
        kind="InFlightExecution",
        action="requeued",
        detail={"to": "rt_live"},
        recorded_at=T0,
    )
    queued = ForensicsRecord(
        tenant_id=TENANT,
        runtime_instance_id="rt_dead",
        shared_run_id="srun_2",
        kind="LocalQueued",
        action="requeued",
        recorded_at=T0 + timedelta(seconds=1),
    )
    other = ForensicsRecord(tenant_id=TENANT, runtime_instance_id="rt_x", kind="LocalQueued", action="none")
    for record in (queued, other, in_flight):
        await store.put_forensics(record)
    assert await store.list_forensics(TENANT, runtime_instance_id="rt_dead") == [in_flight, queued]
    assert await store.list_forensics(TENANT, execution_id="exec_1") == [in_flight]


# Run-execution index history


async def test_run_index_history_filters_by_shared_run_and_execution(store: DurableStore) -> None:
    queued = RunIndexEvent(
        tenant_id=TENANT, shared_run_id="srun_1", local_run_id="lrun_1", status="Queued", recorded_at=T0
    )
    running = RunIndexEvent(
        tenant_id=TENANT,
        shared_run_id="srun_1",
        local_run_id="lrun_1",
        execution_id="exec_1",
        runtime_instance_id="rt_1",
        status="Running",
        recorded_at=T0 + timedelta(seconds=1),
    )
    unrelated = RunIndexEvent(tenant_id=TENANT, shared_run_id="srun_2", status="Queued", recorded_at=T0)
    for event in (running, unrelated, queued):
        await store.append_run_index_event(event)
    assert await store.list_run_index_history(TENANT, shared_run_id="srun_1") == [queued, running]
    assert await store.list_run_index_history(TENANT, execution_id="exec_1") == [running]


# Evidence of a finished execution (ledger event, root span)


async def test_has_ledger_event_and_has_span_answer_only_for_the_owning_tenant(store: DurableStore) -> None:
    await store.append_ledger([_ledger("execution.finalized", execution_id="exec_1")])
    await store.put_spans([_span("00f067aa0ba902b7", 1)])
    trace_id = _span("00f067aa0ba902b7", 1).trace_id
    assert await store.has_ledger_event(TENANT, "exec_1", "execution.finalized")
    assert not await store.has_ledger_event(TENANT, "exec_1", "execution.created")
    assert not await store.has_ledger_event(TENANT, "exec_2", "execution.finalized")
    assert not await store.has_ledger_event(FOREIGN, "exec_1", "execution.finalized")
    assert await store.has_span(TENANT, trace_id, "00f067aa0ba902b7")
    assert not await store.has_span(TENANT, trace_id, "b7ad6b7169203331")
    assert not await store.has_span(FOREIGN, trace_id, "00f067aa0ba902b7")


# Run records


def _run_record(
    shared_run_id: str,
    *,
    created_at: datetime = T0,
    tenant_id: str = TENANT,
    status: str = "Completed",
    shared_status: str = "Dispatched",
    pipeline_name: str = "rag",
    submitted_by: str = "alice",
    ended_at: datetime | None = None,
) -> RunRecord:
    suffix = shared_run_id.removeprefix("srun_")
    return RunRecord(
        shared_run_id=shared_run_id,
        tenant_id=tenant_id,
        local_run_id=f"lrun_{suffix}",
        execution_id=f"exec_{suffix}",
        pipeline_name=pipeline_name,
        pipeline_version="1",
        submitted_by=submitted_by,
        submit_mode="QueueFirst",
        status=status,
        shared_status=shared_status,
        local_status=status,
        execution_status=status,
        snapshot={"user_id": submitted_by, "tenant_id": tenant_id},
        steps=[RunRecordStep(name="only", step_key="test.noop", status=status, retry_count=1)],
        result={"only": {"data": {"n": [1, 2.5, None, True]}}},
        created_at=created_at,
        dispatched_at=created_at + timedelta(milliseconds=5),
        started_at=created_at + timedelta(milliseconds=7),
        ended_at=ended_at or created_at + timedelta(seconds=1),
        archived_at=created_at + timedelta(seconds=2),
    )


async def test_run_record_round_trips_and_is_found_by_any_of_its_ids(store: DurableStore) -> None:
    record = _run_record("srun_1")
    await store.put_run_record(record)
    assert await store.find_run_record(TENANT, shared_run_id="srun_1") == record
    assert await store.find_run_record(TENANT, local_run_id="lrun_1") == record
    assert await store.find_run_record(TENANT, execution_id="exec_1") == record
    assert await store.find_run_record(TENANT, execution_id="exec_2") is None
    assert await store.find_run_record(FOREIGN, shared_run_id="srun_1") is None
    assert await store.list_run_records(FOREIGN, RunRecordQuery()) == []


async def test_writing_a_run_record_again_replaces_it(store: DurableStore) -> None:
    await store.put_run_record(_run_record("srun_1", status="Failed"))
    await store.put_run_record(_run_record("srun_1", status="Completed"))
    assert await store.find_run_record(TENANT, shared_run_id="srun_1") == _run_record("srun_1")


async def test_a_run_record_of_another_tenant_with_the_same_id_is_a_conflict(store: DurableStore) -> None:
    await store.put_run_record(_run_record("srun_1"))
    with pytest.raises(ConflictError):
        await store.put_run_record(_run_record("srun_1", tenant_id=FOREIGN))
    assert await store.find_run_record(TENANT, shared_run_id="srun_1") == _run_record("srun_1")


async def test_run_records_list_newest_first_with_ties_broken_by_id(store: DurableStore) -> None:
    records = [
        _run_record("srun_a", created_at=T0),
        _run_record("srun_b", created_at=T0 + timedelta(seconds=1)),
        _run_record("srun_c", created_at=T0 + timedelta(seconds=1)),
        _run_record("srun_d", created_at=T0 + timedelta(seconds=2)),
    ]
    for record in records:
        await store.put_run_record(record)
    listed = await store.list_run_records(TENANT, RunRecordQuery())
    assert [r.shared_run_id for r in listed] == ["srun_d", "srun_c", "srun_b", "srun_a"]


async def test_run_record_pages_continue_strictly_after_the_cursor(store: DurableStore) -> None:
    for n in range(7):
        await store.put_run_record(_run_record(f"srun_{n}", created_at=T0 + timedelta(seconds=n // 2)))
    seen: list[str] = []
    cursor: RunRecordCursor | None = None
    while True:
        page = await store.list_run_records(TENANT, RunRecordQuery(limit=3, before=cursor))
        seen += [r.shared_run_id for r in page]
        if len(page) < 3:
            break
        cursor = RunRecordCursor(created_at=page[-1].created_at, shared_run_id=page[-1].shared_run_id)
    assert seen == ["srun_6", "srun_5", "srun_4", "srun_3", "srun_2", "srun_1", "srun_0"]


async def test_run_record_pages_go_back_towards_newer_records_oldest_first(store: DurableStore) -> None:
    for n in range(7):
        await store.put_run_record(_run_record(f"srun_{n}", created_at=T0 + timedelta(seconds=n // 2)))
    cursor = RunRecordCursor(created_at=T0 + timedelta(seconds=1), shared_run_id="srun_2")
    newer = await store.list_run_records(TENANT, RunRecordQuery(limit=3, after=cursor, oldest_first=True))
    assert [r.shared_run_id for r in newer] == ["srun_3", "srun_4", "srun_5"]
    rest = RunRecordCursor(created_at=newer[-1].created_at, shared_run_id=newer[-1].shared_run_id)
    last = await store.list_run_records(TENANT, RunRecordQuery(limit=3, after=rest, oldest_first=True))
    assert [r.shared_run_id for r in last] == ["srun_6"]


async def test_run_records_are_counted_per_status_under_the_filters_but_not_the_status(
    store: DurableStore,
) -> None:
    await store.put_run_record(_run_record("srun_1"))
    await store.put_run_record(_run_record("srun_2", status="Failed"))
    await store.put_run_record(_run_record("srun_3", status="Failed", pipeline_name="fan"))
    await store.put_run_record(_run_record("srun_4", status="Cancelled", created_at=T0 + timedelta(hours=1)))
    await store.put_run_record(_run_record("srun_5", tenant_id=FOREIGN, status="Failed"))
    assert await store.count_run_records(TENANT, RunRecordQuery(status="Completed")) == {
        "Completed": 1,
        "Failed": 2,
        "Cancelled": 1,
    }
    assert await store.count_run_records(TENANT, RunRecordQuery(pipeline_name="fan")) == {"Failed": 1}
    window = RunRecordQuery(created_before=T0 + timedelta(minutes=1))
    assert await store.count_run_records(TENANT, window) == {"Completed": 1, "Failed": 2}


async def test_run_record_filters_combine(store: DurableStore) -> None:
    await store.put_run_record(_run_record("srun_1", pipeline_name="rag", submitted_by="alice"))
    await store.put_run_record(_run_record("srun_2", pipeline_name="fan", submitted_by="alice"))
    await store.put_run_record(
        _run_record("srun_3", status="Cancelled", shared_status="Cancelled", submitted_by="bob")
    )
    await store.put_run_record(_run_record("srun_4", created_at=T0 + timedelta(hours=1)))

    async def ids(**filters: object) -> list[str]:
        query = RunRecordQuery.model_validate(filters)
        return sorted(r.shared_run_id for r in await store.list_run_records(TENANT, query))

    assert await ids(pipeline_name="fan") == ["srun_2"]
    assert await ids(submitted_by="bob") == ["srun_3"]
    assert await ids(shared_status="Cancelled") == ["srun_3"]
    assert await ids(status="Completed", submitted_by="alice") == ["srun_1", "srun_2", "srun_4"]
    assert await ids(created_after=T0 + timedelta(minutes=1)) == ["srun_4"]
    assert await ids(created_before=T0 + timedelta(minutes=1)) == ["srun_1", "srun_2", "srun_3"]
    assert await ids(created_after=T0, created_before=T0 + timedelta(minutes=1), pipeline_name="x") == []


# Submitted runs


def _submitted(shared_run_id: str, tenant_id: str = TENANT, at: datetime = T0) -> SubmittedRun:
    run = {
        "shared_run_id": shared_run_id,
        "input": {"n": 1, "nested": [1, "two"]},
        "status": "QueuedGlobally",
    }
    return SubmittedRun(shared_run_id=shared_run_id, tenant_id=tenant_id, run=run, submitted_at=at)


async def test_submitted_runs_list_every_tenant_in_id_order_page_by_page(store: DurableStore) -> None:
    records = [_submitted("srun_b"), _submitted("srun_a", FOREIGN), _submitted("srun_c")]
    for record in records:
        await store.put_submitted_run(record)
    assert await store.list_submitted_runs() == sorted(records, key=lambda r: r.shared_run_id)
    first = await store.list_submitted_runs(limit=2)
    assert [r.shared_run_id for r in first] == ["srun_a", "srun_b"]
    assert [r.shared_run_id for r in await store.list_submitted_runs(after=first[-1].shared_run_id)] == [
        "srun_c"
    ]


async def test_a_submitted_run_is_deleted_only_by_its_own_tenant_and_never_taken_over(
    store: DurableStore,
) -> None:
    await store.put_submitted_run(_submitted("srun_x"))
    with pytest.raises(ConflictError, match="another tenant"):
        await store.put_submitted_run(_submitted("srun_x", FOREIGN))
    await store.delete_submitted_run(FOREIGN, "srun_x")
    assert [r.tenant_id for r in await store.list_submitted_runs()] == [TENANT]
    await store.delete_submitted_run(TENANT, "srun_x")
    await store.delete_submitted_run(TENANT, "srun_x")  # forgetting twice is not an error
    assert await store.list_submitted_runs() == []


async def test_the_run_record_purge_removes_old_submitted_runs(store: DurableStore) -> None:
    await store.put_submitted_run(_submitted("srun_old", at=T0))
    await store.put_submitted_run(_submitted("srun_new", at=T0 + timedelta(days=10)))
    assert await store.purge(DurableRecordKind.RUN_RECORDS, T0 + timedelta(days=5)) == 1
    assert [r.shared_run_id for r in await store.list_submitted_runs()] == ["srun_new"]


# Retention purge


async def test_purge_deletes_only_records_older_than_the_cutoff(store: DurableStore) -> None:
    old, new = T0, T0 + timedelta(days=10)
    cutoff = T0 + timedelta(days=5)
    await store.append_ledger([_ledger("old", at=old), _ledger("new", at=new)])
    old_span, new_span = _span("00f067aa0ba902b7", 1_000), _span("b7ad6b7169203331", 2_000)
    new_span = new_span.model_copy(
        update={"start_ns": int(new.timestamp() * 1e9), "end_ns": int(new.timestamp() * 1e9) + 1}
    )
    old_span = old_span.model_copy(
        update={"start_ns": int(old.timestamp() * 1e9), "end_ns": int(old.timestamp() * 1e9) + 1}
    )
    await store.put_spans([old_span, new_span])
    for at, instance in ((old, "rt_old"), (new, "rt_new")):
        await store.put_forensics(
            ForensicsRecord(
                tenant_id=TENANT, runtime_instance_id=instance, kind="k", action="a", recorded_at=at
            )
        )
    await store.put_run_record(_run_record("srun_old", ended_at=old))
    await store.put_run_record(_run_record("srun_new", created_at=new, ended_at=new))

    assert await store.purge(DurableRecordKind.LEDGER, cutoff) == 1
    assert await store.purge(DurableRecordKind.TRACE, cutoff) == 1
    assert await store.purge(DurableRecordKind.FORENSICS, cutoff) == 1
    assert await store.purge(DurableRecordKind.RUN_RECORDS, cutoff) == 1

    assert [e.event for e in await store.list_ledger(TENANT)] == ["new"]
    assert await store.list_spans(TENANT, "exec_1") == [new_span]
    assert [f.runtime_instance_id for f in await store.list_forensics(TENANT)] == ["rt_new"]
    assert [r.shared_run_id for r in await store.list_run_records(TENANT, RunRecordQuery())] == ["srun_new"]


async def test_purging_a_snapshot_removes_its_executions_payloads_and_archived_steps(
    store: DurableStore,
) -> None:
    old = _snapshot("exec_old").model_copy(update={"created_at": T0})
    new = _snapshot("exec_new").model_copy(update={"created_at": T0 + timedelta(days=10)})
    for snapshot in (old, new):
        await store.put_snapshot(snapshot)
        execution_id = snapshot.execution_id
        await store.put_payload(f"pl_{execution_id}", TENANT, execution_id, "s", b"body", "text/plain")
        await store.archive_step(
            ArchivedStep(execution_id=execution_id, tenant_id=TENANT, step_name="s", status="Completed")
        )
    assert await store.purge(DurableRecordKind.SNAPSHOTS, T0 + timedelta(days=5)) == 1
    assert await store.get_snapshot("exec_old", TENANT) is None
    assert await store.get_payload("pl_exec_old", TENANT) is None
    assert await store.list_archived_steps("exec_old", TENANT) == []
    assert await store.get_snapshot("exec_new", TENANT) == new
    assert await store.get_payload("pl_exec_new", TENANT) == b"body"
    assert len(await store.list_archived_steps("exec_new", TENANT)) == 1


async def test_purge_removes_at_most_its_batch_size_oldest_first(store: DurableStore) -> None:
    await store.append_ledger([_ledger(f"e{n}", at=T0 + timedelta(seconds=n), sequence=n) for n in range(5)])
    assert await store.purge(DurableRecordKind.LEDGER, T0 + timedelta(days=1), limit=2) == 2
    assert [e.event for e in await store.list_ledger(TENANT)] == ["e2", "e3", "e4"]
    assert await store.purge(DurableRecordKind.LEDGER, T0 + timedelta(days=1), limit=10) == 3
    assert await store.purge(DurableRecordKind.LEDGER, T0 + timedelta(days=1)) == 0


# Lifecycle


async def test_health_passes_while_open_and_fails_after_close(store: DurableStore) -> None:
    await store.health()
    await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.health()


async def test_probe_write_succeeds_again_and_again_and_fails_after_close(store: DurableStore) -> None:
    """The readiness probe upserts one record: repeated probes keep succeeding (and stay one record)."""
    for _ in range(3):
        await store.probe_write()
    await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.probe_write()


# Backend-specific behaviour


async def test_two_sqlite_stores_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / SQLITE_FILE_NAME
    first, second = await SqliteDurableStore.open(path), await SqliteDurableStore.open(path)
    try:
        await first.put_snapshot(_snapshot("exec_1"))
        await second.put_payload("pl_1", TENANT, "exec_2", "s", b"from second", "text/plain")
        await asyncio.gather(
            first.append_ledger([_ledger(f"first{i}", sequence=i) for i in range(50)]),
            second.append_ledger([_ledger(f"second{i}", sequence=i) for i in range(50)]),
        )
        assert await second.get_snapshot("exec_1", TENANT) == _snapshot("exec_1")
        assert await first.get_payload("pl_1", TENANT) == b"from second"
        assert len(await first.list_ledger(TENANT)) == len(await second.list_ledger(TENANT)) == 100
    finally:
        await first.close()
        await second.close()


async def test_cancelled_sqlite_batches_are_all_or_nothing_and_leave_the_store_writable(
    tmp_path: Path,
) -> None:
    """Cancel ledger appends after 0..N loop iterations: before, during and after the transaction."""
    store = await SqliteDurableStore.open(tmp_path / SQLITE_FILE_NAME)
    batch_size = 20
    try:
        for iterations in range(60):
            batch = [_ledger(f"batch{iterations}", sequence=i) for i in range(batch_size)]
            append = asyncio.create_task(store.append_ledger(batch))
            for _ in range(iterations % 12):
                await asyncio.sleep(0)  # a scheduling point to cancel at, not a wait for an outcome
            append.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await append
        await store.append_ledger([_ledger("after")])
        counts = Counter(e.event for e in await store.list_ledger(TENANT, limit=10_000))
        assert counts.pop("after") == 1
        assert set(counts.values()) <= {batch_size}
    finally:
        await store.close()


async def test_sqlite_store_runs_in_wal_mode(tmp_path: Path) -> None:
    store = await SqliteDurableStore.open(tmp_path / SQLITE_FILE_NAME)
    try:
        with sqlite3.connect(store.path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        await store.close()


async def test_embedded_settings_put_the_database_in_the_data_dir(tmp_path: Path) -> None:
    store = await open_durable_store(DurableStoreSettings.embedded(tmp_path / "data"))
    try:
        assert isinstance(store, SqliteDurableStore)
        assert store.path == tmp_path / "data" / SQLITE_FILE_NAME
        assert store.path.exists()
    finally:
        await store.close()


async def test_unusable_sqlite_path_raises_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("a file where the data directory should be")
    with pytest.raises(StoreUnavailableError):
        await open_durable_store(DurableStoreSettings.embedded(tmp_path / "not-a-dir"))


MONGODB_PASSWORD = "mongo-Pa55-never-printed"


async def test_unreachable_mongodb_raises_store_unavailable_without_the_password() -> None:
    uri = f"mongodb://app:{MONGODB_PASSWORD}@127.0.0.1:{find_free_port()}/"
    settings = DurableStoreSettings.from_url(uri, mongodb_timeout_ms=300)
    with pytest.raises(StoreUnavailableError) as raised:
        await open_durable_store(settings)
    assert MONGODB_PASSWORD not in f"{raised.value} {raised.value!r}"


@pytest.mark.parametrize(
    "uri",
    [
        f"mongodb://app:{MONGODB_PASSWORD}@127.0.0.1:port/",  # not a port number
        f"mongodb://app:{MONGODB_PASSWORD}@ssword@127.0.0.1/",  # an unescaped @
        f"mongodb+srv://app:{MONGODB_PASSWORD}@cluster.example:27017/",  # srv takes no port
    ],
)
async def test_an_invalid_mongodb_uri_is_a_configuration_error_without_the_password(uri: str) -> None:
    with pytest.raises(ConfigurationError, match="MongoDB URI is invalid") as raised:
        await open_durable_store(DurableStoreSettings.from_url(uri))
    assert MONGODB_PASSWORD not in f"{raised.value} {raised.value!r}"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_settings_require_the_selected_backends_location() -> None:
    with pytest.raises(ValidationError, match="sqlite_path"):
        DurableStoreSettings(backend="sqlite")
    with pytest.raises(ValidationError, match="mongodb_uri"):
        DurableStoreSettings(backend="mongodb")
    with pytest.raises(ValidationError, match="postgresql_conninfo"):
        DurableStoreSettings(backend="postgresql")


def test_naive_datetimes_are_rejected() -> None:
    with pytest.raises(ValidationError, match="timezone-aware"):
        LedgerEntry(tenant_id=TENANT, event="e", recorded_at=datetime(2026, 1, 1))


async def test_sqlite_statements_and_their_parameters_never_reach_the_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No statement or parameter (tenant and run ids) is logged, at any level."""
    store = await SqliteDurableStore.open(tmp_path / SQLITE_FILE_NAME)
    try:
        with caplog.at_level(logging.DEBUG):
            await store.append_ledger([_ledger("step.completed", sequence=1, execution_id="exec_logged")])
            assert await store.list_ledger(TENANT, execution_id="exec_logged")
    finally:
        await store.close()
    assert not [r for r in caplog.records if "exec_logged" in r.getMessage()]
