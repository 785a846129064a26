"""Issue 13.6: durable-store retention. Each record kind is purged once it is older than its own
window (ledger, trace, forensics, snapshots with their payloads, run records), in the background,
and a kind without a window is kept. Real SQLite and PostgreSQL stores; the windows come from the
settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from runtime_core.lifecycle import DurablePurge, DurableRetention, LifecycleSettings
from runtime_core.storage import (
    DurableRecordKind,
    DurableStore,
    ForensicsRecord,
    LedgerEntry,
    RunRecord,
    RunRecordQuery,
    TerminalSnapshot,
    TraceSpan,
    utc_now,
)
from tests.durable_backends import SQL_BACKENDS, sql_backend
from tests.helpers import wait_until

TENANT = "tenant-a"
NOW = utc_now()


@pytest.fixture(params=SQL_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DurableStore]:
    async with sql_backend(request, request.param, tmp_path) as opened:
        yield opened.store


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def _span(span_id: str, end: datetime) -> TraceSpan:
    end_ns = int(end.timestamp() * 1e9)
    return TraceSpan(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id=span_id,
        tenant_id=TENANT,
        execution_id="exec_1",
        name="step",
        start_ns=end_ns - 1_000,
        end_ns=end_ns,
        status="OK",
    )


def _run_record(shared_run_id: str, ended: datetime) -> RunRecord:
    return RunRecord(
        shared_run_id=shared_run_id,
        tenant_id=TENANT,
        pipeline_name="one",
        pipeline_version="1",
        submitted_by="ada",
        submit_mode="QueueFirst",
        status="Completed",
        shared_status="Dispatched",
        snapshot={"tenant_id": TENANT, "user_id": "ada"},
        created_at=ended - timedelta(seconds=1),
        ended_at=ended,
    )


async def seed(store: DurableStore) -> None:
    """For each kind: one record just outside its default window, one well inside it."""
    await store.append_ledger(
        [
            LedgerEntry(tenant_id=TENANT, event="old", recorded_at=ago(31)),
            LedgerEntry(tenant_id=TENANT, event="new", recorded_at=ago(29)),
        ]
    )
    await store.put_spans([_span("00f067aa0ba902b7", ago(8)), _span("b7ad6b7169203331", ago(6))])
    for days, instance in ((91, "rt_old"), (89, "rt_new")):
        await store.put_forensics(
            ForensicsRecord(
                tenant_id=TENANT, runtime_instance_id=instance, kind="k", action="a", recorded_at=ago(days)
            )
        )
    for days, execution_id in ((31, "exec_old"), (29, "exec_new")):
        await store.put_snapshot(
            TerminalSnapshot(
                execution_id=execution_id,
                tenant_id=TENANT,
                pipeline_name="one",
                pipeline_version="1",
                status="Completed",
                snapshot={},
                fingerprint="f" * 64,
                created_at=ago(days),
            )
        )
        await store.put_payload(f"pl_{execution_id}", TENANT, execution_id, "s", b"{}", "application/json")
    await store.put_run_record(_run_record("srun_old", ago(31)))
    await store.put_run_record(_run_record("srun_new", ago(29)))


async def remaining(store: DurableStore) -> dict[str, list[str]]:
    return {
        "ledger": [e.event for e in await store.list_ledger(TENANT)],
        "trace": [s.span_id for s in await store.list_spans(TENANT, "exec_1")],
        "forensics": [f.runtime_instance_id for f in await store.list_forensics(TENANT)],
        "snapshots": [
            execution_id
            for execution_id in ("exec_old", "exec_new")
            if await store.get_snapshot(execution_id, TENANT) is not None
        ],
        "payloads": [
            execution_id
            for execution_id in ("exec_old", "exec_new")
            if await store.get_payload(f"pl_{execution_id}", TENANT) is not None
        ],
        "run_records": [r.shared_run_id for r in await store.list_run_records(TENANT, RunRecordQuery())],
    }


KEPT = {
    "ledger": ["new"],
    "trace": ["b7ad6b7169203331"],
    "forensics": ["rt_new"],
    "snapshots": ["exec_new"],
    "payloads": ["exec_new"],
    "run_records": ["srun_new"],
}


async def test_one_pass_purges_each_kind_older_than_its_window_and_keeps_the_rest(
    store: DurableStore,
) -> None:
    await seed(store)
    purged = await DurablePurge(store, DurableRetention()).purge_once(NOW)
    assert purged == {kind: 1 for kind in DurableRecordKind}
    assert await remaining(store) == KEPT


async def test_a_kind_kept_forever_is_never_purged(store: DurableStore) -> None:
    await seed(store)
    purged = await DurablePurge(store, DurableRetention(ledger_days=None, trace_days=None)).purge_once(NOW)
    assert DurableRecordKind.LEDGER not in purged and DurableRecordKind.TRACE not in purged
    left = await remaining(store)
    assert (left["ledger"], left["trace"]) == (["old", "new"], ["00f067aa0ba902b7", "b7ad6b7169203331"])
    assert left["run_records"] == ["srun_new"]


async def test_a_pass_deletes_in_batches_until_nothing_old_is_left(store: DurableStore) -> None:
    await store.append_ledger(
        [LedgerEntry(tenant_id=TENANT, event=f"e{n}", recorded_at=ago(40)) for n in range(25)]
    )
    purged = await DurablePurge(store, DurableRetention(purge_batch=4)).purge_once(NOW)
    assert purged[DurableRecordKind.LEDGER] == 25
    assert await store.list_ledger(TENANT) == []


async def test_the_background_purge_runs_by_itself(store: DurableStore) -> None:
    await seed(store)
    purge = DurablePurge(store, DurableRetention(purge_interval_ms=50))
    purge.start()
    try:

        async def purged() -> bool:
            return await remaining(store) == KEPT

        await wait_until(purged, timeout=10, interval=0.05)
    finally:
        await purge.stop()


def test_windows_and_grace_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_RUNTIME_HOT_GRACE_MS", "1500")
    monkeypatch.setenv("MCP_RUNTIME_HOT_RECORD_RETENTION_MS", "60000")
    monkeypatch.setenv("MCP_RUNTIME_RETENTION_LEDGER_DAYS", "forever")
    monkeypatch.setenv("MCP_RUNTIME_RETENTION_TRACE_DAYS", "2.5")
    settings = LifecycleSettings.from_env()
    assert (settings.hot.grace_ms, settings.hot.record_retention_ms) == (1500, 60_000)
    windows = settings.durable.windows()
    assert DurableRecordKind.LEDGER not in windows
    assert windows[DurableRecordKind.TRACE] == timedelta(days=2.5)
    assert windows[DurableRecordKind.SNAPSHOTS] == timedelta(days=30)
