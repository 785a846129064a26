"""Ledger, trace, forensics and metrics: contents, batching and tenant scoping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.audit import (
    LedgerRecorder,
    MetricsObserver,
    RuntimeMetrics,
    execution_span_id,
    trace_id_for,
)
from runtime_core.dag import DagStore, EngineEvent
from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import HotState
from runtime_core.pipeline import parse_pipeline
from runtime_core.storage import LedgerEntry, SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.audit_support import INSTANCE_ID, TENANT_A, TENANT_B, Rig, make_rig

SIMPLE = parse_pipeline(
    {
        "name": "simple",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
        ],
    }
)

RETRYING = parse_pipeline(
    {
        "name": "retrying",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {
                "name": "flaky",
                "stepKey": "test.flaky",
                "dependsOn": ["a"],
                "config": {"failTimes": 1, "retry": {"maxRetries": 1, "baseDelayMs": 1}},
            },
        ],
    }
)


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[SqliteDurableStore]:
    store = await SqliteDurableStore.open(tmp_path / "runtime.db")
    yield store
    await store.close()


async def run_simple(rig: Rig) -> str:
    attributes = {"shared_run_id": "srun_ledger", "local_run_id": "lrun_ledger"}
    execution_id = await rig.engine.create_execution(SIMPLE, {}, TENANT_A, attributes=attributes)
    assert await rig.engine.run(execution_id, workers=1) == "Completed"
    return execution_id


async def test_ledger_of_a_simple_run_has_the_expected_event_sequence(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await run_simple(rig)

    ledger = await rig.audit.queries.ledger(TENANT_A, execution_id=execution_id)

    assert [(e.event, e.step_name) for e in ledger] == [
        ("execution.created", None),
        ("step.claimed", "a"),
        ("step.completed", "a"),
        ("step.claimed", "b"),
        ("step.completed", "b"),
        ("execution.finalized", None),
    ]
    assert {(e.tenant_id, e.runtime_instance_id, e.shared_run_id, e.local_run_id) for e in ledger} == {
        ("tenant-a", INSTANCE_ID, "srun_ledger", "lrun_ledger")
    }
    assert ledger[-1].attributes["status"] == "Completed"
    assert ledger[1].attributes["worker_id"].startswith(INSTANCE_ID)
    by_shared_run = await rig.audit.queries.ledger(TENANT_A, shared_run_id="srun_ledger")
    assert [e.entry_id for e in by_shared_run] == [e.entry_id for e in ledger]


async def test_ledger_entries_are_buffered_until_the_batch_is_full_or_flushed(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    recorder = LedgerRecorder(
        durable, DagStore(hot_state), instance_id=INSTANCE_ID, batch_size=3, flush_interval_s=60
    )

    async def stored() -> int:
        return len(await durable.list_ledger(TENANT_A.tenant_id, execution_id="exec_buffered"))

    for n in range(2):
        await recorder.on_event(EngineEvent("step.claimed", "exec_buffered", TENANT_A, step_name=f"s{n}"))
    assert (await stored(), recorder.pending) == (0, 2)
    await recorder.on_event(EngineEvent("step.claimed", "exec_buffered", TENANT_A, step_name="s2"))
    assert (await stored(), recorder.pending) == (3, 0)
    await recorder.on_event(EngineEvent("step.claimed", "exec_buffered", TENANT_A, step_name="s3"))
    await recorder.flush()
    assert (await stored(), recorder.pending) == (4, 0)


async def test_tenant_b_reads_nothing_of_tenant_a_ledger_trace_or_forensics(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await run_simple(rig)
    await rig.audit.forensics.record(
        TENANT_A,
        runtime_instance_id="rt_dead",
        kind="in_flight_execution",
        action="requeued",
        execution_id=execution_id,
    )
    queries = rig.audit.queries

    assert await queries.ledger(TENANT_B, execution_id=execution_id) == []
    assert await queries.ledger(TENANT_B, shared_run_id="srun_ledger") == []
    assert await queries.trace(TENANT_B, execution_id) == []
    assert await queries.forensics(TENANT_B, execution_id=execution_id) == []
    assert await queries.terminal_snapshot(TENANT_B, execution_id) is None
    assert await queries.ledger(TENANT_A, execution_id=execution_id)
    assert await queries.trace(TENANT_A, execution_id)
    assert [r.action for r in await queries.forensics(TENANT_A, runtime_instance_id="rt_dead")] == [
        "requeued"
    ]


async def test_trace_has_one_root_span_and_one_span_per_step_attempt(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await rig.engine.create_execution(RETRYING, {}, TENANT_A)
    assert await rig.engine.run(execution_id, workers=2) == "Completed"

    spans = await rig.audit.queries.trace(TENANT_A, execution_id)

    root = [s for s in spans if s.parent_span_id is None]
    assert [(s.span_id, s.name, s.status) for s in root] == [
        (execution_span_id(execution_id), "execution", "OK")
    ]
    attempts = sorted((s.step_name, s.status) for s in spans if s.parent_span_id is not None)
    assert attempts == [("a", "OK"), ("flaky", "ERROR"), ("flaky", "OK")]
    assert {s.trace_id for s in spans} == {trace_id_for(execution_id)}
    assert {s.parent_span_id for s in spans if s.step_name} == {root[0].span_id}
    assert all(s.end_ns >= s.start_ns > 0 and s.tenant_id == "tenant-a" for s in spans)
    assert len({s.span_id for s in spans}) == len(spans)


async def test_metrics_count_a_run_on_a_dedicated_registry(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    untouched = RuntimeMetrics()
    execution_id = await rig.engine.create_execution(RETRYING, {}, TENANT_A)
    assert await rig.engine.run(execution_id, workers=2) == "Completed"

    metrics = rig.audit.metrics
    assert metrics.value("mcprt_executions_started_total") == 1
    assert metrics.value("mcprt_executions_finished_total", {"status": "Completed"}) == 1
    assert metrics.value("mcprt_steps_total", {"outcome": "completed"}) == 2
    assert metrics.value("mcprt_step_retries_total", {"step_key": "test.flaky"}) == 1
    assert metrics.value("mcprt_step_retries_exhausted_total", {"step_key": "test.flaky"}) == 0
    flaky_ok = {"step_key": "test.flaky", "outcome": "completed"}
    assert metrics.value("mcprt_step_duration_seconds_count", flaky_ok) == 1
    assert metrics.value("mcprt_step_duration_seconds_count", {**flaky_ok, "outcome": "retry_scheduled"}) == 1
    # The terminal snapshot resolves both (inline) results once: two Redis-layer hits.
    assert metrics.value("mcprt_resolver_hits_total", {"layer": "redis"}) == 2
    assert metrics.value("mcprt_snapshots_written_total") == 1
    assert untouched.value("mcprt_executions_started_total") == 0
    assert b"mcprt_lease_denials_total" in metrics.render()


async def test_lease_and_admission_denials_are_counted_by_scope() -> None:
    metrics = RuntimeMetrics()
    observer = MetricsObserver(metrics)
    scope = "mcprt:{concurrency:provider:openai}:scope"
    await observer.on_event(
        EngineEvent("step.lease_denied", "exec_x", TENANT_A, attributes={"scope_key": scope})
    )
    await observer.on_event(
        EngineEvent("step.admission_denied", "exec_x", TENANT_A, attributes={"policy": "concurrency.x"})
    )
    assert metrics.value("mcprt_lease_denials_total", {"scope": scope}) == 1
    assert metrics.value("mcprt_lease_denials_total", {"scope": "admission:concurrency.x"}) == 1


async def test_an_overdue_ledger_batch_is_written_on_the_next_event(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    recorder = LedgerRecorder(
        durable, DagStore(hot_state), instance_id=INSTANCE_ID, batch_size=100, flush_interval_s=0
    )
    await recorder.on_event(EngineEvent("step.claimed", "exec_overdue", TENANT_A, step_name="s"))
    assert recorder.pending == 0
    assert len(await durable.list_ledger(TENANT_A.tenant_id, execution_id="exec_overdue")) == 1


async def test_a_quiet_ledger_batch_is_written_once_overdue_without_another_event(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    """An execution waiting on a long step emits nothing more: its buffered entries must not
    wait for the next event (a killed process would lose them)."""
    recorder = LedgerRecorder(
        durable, DagStore(hot_state), instance_id=INSTANCE_ID, batch_size=100, flush_interval_s=0.2
    )
    await recorder.on_event(EngineEvent("step.claimed", "exec_quiet", TENANT_A, step_name="s"))

    async def written() -> bool:
        return len(await durable.list_ledger(TENANT_A.tenant_id, execution_id="exec_quiet")) == 1

    await wait_until(written, timeout=5, interval=0.02)
    assert recorder.pending == 0


class UnreachableStore:
    """The real store behind a link that can fail (a partition): while `down`, a ledger write
    hangs until `release` is set, then fails as the PostgreSQL pool does after its timeout."""

    def __init__(self, store: SqliteDurableStore) -> None:
        self.store = store
        self.down = True
        self.release = asyncio.Event()
        self.writes = 0

    async def append_ledger(self, entries: list[LedgerEntry]) -> None:
        self.writes += 1
        if self.down:
            await self.release.wait()
            raise StoreUnavailableError("injected: the durable store did not answer")
        await self.store.append_ledger(entries)


def outage_recorder(hot_state: HotState, store: UnreachableStore, batch_size: int = 100) -> LedgerRecorder:
    """A recorder writing through `store` (it only appends ledger batches)."""
    return LedgerRecorder(
        store,  # type: ignore[arg-type]
        DagStore(hot_state),
        instance_id=INSTANCE_ID,
        batch_size=batch_size,
        flush_interval_s=0.05,
    )


def entry(execution_id: str, n: int) -> LedgerEntry:
    return LedgerEntry(tenant_id=TENANT_A.tenant_id, execution_id=execution_id, event=f"test.{n}")


async def test_entries_kept_through_a_store_outage_are_written_once_it_answers_without_another_event(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    store = UnreachableStore(durable)
    recorder = outage_recorder(hot_state, store, batch_size=2)
    await recorder.append(entry("exec_outage", 1))
    await wait_until(lambda: _true(store.writes >= 1), timeout=5, interval=0.01)  # the overdue write hangs
    for n in (2, 3):  # a full batch: still never waits for the write under way
        await asyncio.wait_for(recorder.append(entry("exec_outage", n)), timeout=1)
    store.release.set()  # the hanging write fails
    store.down = False  # and the store answers again: the retry is the timer's, no event comes

    async def written() -> bool:
        return len(await durable.list_ledger(TENANT_A.tenant_id, execution_id="exec_outage")) == 3

    await wait_until(written, timeout=5, interval=0.02)
    assert recorder.pending == 0


async def test_a_caller_cancelled_while_its_flush_waits_on_the_store_loses_no_entry(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    """A submit whose client went away is cancelled mid-flush: the batch it was writing holds
    other runs' entries too, and must be written later."""
    store = UnreachableStore(durable)
    recorder = outage_recorder(hot_state, store)
    for n in range(3):
        await recorder.append(entry("exec_cancelled", n))
    flushing = asyncio.create_task(recorder.append(entry("exec_cancelled", 3), flush=True))
    await wait_until(lambda: _true(store.writes >= 1), timeout=5, interval=0.01)
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    assert recorder.pending == 4
    store.down = False
    await recorder.flush()
    assert len(await durable.list_ledger(TENANT_A.tenant_id, execution_id="exec_cancelled")) == 4


async def _true(value: bool) -> bool:
    return value
