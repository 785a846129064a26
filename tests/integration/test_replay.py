"""Terminal snapshots and Replay(ExecutionId), against a real redis-server and SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.audit import ExecutionDocument, ReplaySource, fingerprint_view
from runtime_core.dag import StepStatus
from runtime_core.errors import NotFoundError
from runtime_core.hot_state import HotState
from runtime_core.pipeline import parse_pipeline
from runtime_core.storage import SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.audit_support import TENANT_A, TENANT_B, GateExecutor, Rig, make_rig

PIPELINE = parse_pipeline(
    {
        "name": "replayable",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "big", "stepKey": "test.big", "config": {"sizeBytes": 40_000}},
            {
                "name": "flaky",
                "stepKey": "test.flaky",
                "dependsOn": ["a"],
                "config": {"failTimes": 1, "retry": {"maxRetries": 2, "baseDelayMs": 1}},
            },
            {
                "name": "reader",
                "stepKey": "test.big",
                "dependsOn": ["big", "flaky"],
                "input": {"upstream": "steps.big.result.data"},
                "config": {"sizeBytes": 40_000},
            },
        ],
    }
)

MID_FLIGHT = parse_pipeline(
    {
        "name": "mid-flight",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "gate", "stepKey": "test.gate", "dependsOn": ["a"]},
            {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
            {
                "name": "join",
                "stepKey": "test.gate",
                "dependsOn": ["gate", "b"],
                "input": {"gate": "steps.gate.result.data.step", "b": "steps.b.result.data.step"},
            },
        ],
    }
)


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[SqliteDurableStore]:
    store = await SqliteDurableStore.open(tmp_path / "runtime.db")
    yield store
    await store.close()


async def completed_execution(rig: Rig) -> str:
    execution_id = await rig.engine.create_execution(PIPELINE, {"q": 1}, TENANT_A)
    assert await rig.engine.run(execution_id, workers=3) == "Completed"
    return execution_id


async def live_fingerprint(rig: Rig, execution_id: str) -> str:
    view = await rig.dag_store.read_execution(execution_id)
    assert view is not None
    return await fingerprint_view(view, rig.audit.resolver)


async def test_terminal_snapshot_is_written_once_normalized_with_the_live_fingerprint(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await completed_execution(rig)
    snapshot = await durable.get_snapshot(execution_id, TENANT_A.tenant_id)
    assert snapshot is not None and snapshot.status == "Completed"
    assert snapshot.fingerprint == await live_fingerprint(rig, execution_id)
    # The document is written as plain JSON: exactly what its model reads back and dumps.
    assert ExecutionDocument.model_validate(snapshot.snapshot).model_dump(mode="json") == snapshot.snapshot
    text = snapshot.model_dump_json()
    assert "token" not in text and "owned" not in text and "claim_seq" not in text
    assert (await rig.audit.snapshots.write_snapshot(execution_id)) == snapshot


async def test_deleted_execution_is_restored_from_its_snapshot_with_the_same_fingerprint(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await completed_execution(rig)
    before = await rig.dag_store.read_execution(execution_id)
    original = await live_fingerprint(rig, execution_id)
    await rig.dag_store.delete_execution(execution_id)

    result = await rig.audit.replay.replay(execution_id, TENANT_A)

    assert (result.restored, result.already_exists, result.source) == (
        True,
        False,
        ReplaySource.TERMINAL_SNAPSHOT,
    )
    after = await rig.dag_store.read_execution(execution_id)
    assert before is not None and after is not None
    assert [(s.name, s.status, s.retry_count, s.owned) for s in after.steps] == [
        (s.name, s.status, s.retry_count, False) for s in before.steps
    ]
    assert await live_fingerprint(rig, execution_id) == original
    validation = await rig.audit.replay.validate(execution_id, TENANT_A)
    assert validation.valid, validation.reason


async def test_replay_twice_is_a_noop(hot_state: HotState, durable: SqliteDurableStore) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await completed_execution(rig)
    await rig.dag_store.delete_execution(execution_id)
    first = await rig.audit.replay.replay(execution_id, TENANT_A)
    fingerprint = await live_fingerprint(rig, execution_id)

    second = await rig.audit.replay.replay(execution_id, TENANT_A)

    assert first.restored and not first.already_exists
    assert (second.restored, second.already_exists, second.source) == (False, True, ReplaySource.LIVE)
    assert await live_fingerprint(rig, execution_id) == fingerprint


async def test_replay_with_live_state_present_restores_nothing(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await completed_execution(rig)
    result = await rig.audit.replay.replay(execution_id, TENANT_A)
    assert (result.already_exists, result.restored, result.status) == (True, False, "Completed")


async def test_replay_of_a_foreign_tenants_execution_is_not_found_like_an_unknown_id(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await completed_execution(rig)
    with pytest.raises(NotFoundError) as live_foreign:
        await rig.audit.replay.replay(execution_id, TENANT_B)
    await rig.dag_store.delete_execution(execution_id)
    with pytest.raises(NotFoundError) as deleted_foreign:
        await rig.audit.replay.replay(execution_id, TENANT_B)
    with pytest.raises(NotFoundError) as unknown:
        await rig.audit.replay.replay("exec_does_not_exist", TENANT_B)
    assert live_foreign.value.code == deleted_foreign.value.code == unknown.value.code == "not_found"
    assert await rig.dag_store.load_meta(execution_id) is None  # nothing was restored for tenant B


async def test_strict_replay_validation_detects_a_live_state_that_diverged(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await completed_execution(rig)
    await hot_state.redis.hset(rig.dag_store.keys(execution_id).result, "a", '{"data":"tampered"}')
    validation = await rig.audit.replay.validate(execution_id, TENANT_A)
    assert not validation.valid
    assert validation.snapshot_fingerprint == validation.recomputed_snapshot_fingerprint
    assert validation.live_fingerprint != validation.snapshot_fingerprint


async def test_mid_flight_replay_resets_running_steps_to_ready_and_the_execution_completes(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    gate = GateExecutor()
    rig = make_rig(hot_state, durable, gate)
    execution_id = await rig.engine.create_execution(MID_FLIGHT, {}, TENANT_A)
    crashed = asyncio.create_task(rig.engine.run(execution_id, workers=2))

    async def gate_running_and_b_completed() -> bool:
        view = await rig.dag_store.read_execution(execution_id)
        statuses = {s.name: s.status for s in view.steps} if view else {}
        return statuses.get("gate") == StepStatus.RUNNING and statuses.get("b") == StepStatus.COMPLETED

    await wait_until(gate_running_and_b_completed)
    assert await rig.audit.checkpoints.checkpoint(execution_id, TENANT_A) == 4
    crashed.cancel()  # the runtime dies mid-step; its live state is lost
    with pytest.raises(asyncio.CancelledError):
        await crashed
    await rig.dag_store.delete_execution(execution_id)

    result = await rig.audit.replay.replay(execution_id, TENANT_A)

    assert (result.restored, result.source, result.status) == (True, ReplaySource.ARCHIVE, "Running")
    view = await rig.dag_store.read_execution(execution_id)
    assert view is not None
    restored = {s.name: (s.status, s.owned) for s in view.steps}
    assert restored == {
        "a": ("Completed", False),
        "gate": ("Ready", False),
        "b": ("Completed", False),
        "join": ("Pending", False),
    }
    gate.release.set()
    assert await rig.engine.run(execution_id, workers=2) == "Completed"
    final = {s.name: s for s in (await rig.dag_store.read_execution(execution_id) or view).steps}
    assert final["join"].result["data"]["inputs"] == {"gate": "gate", "b": "b"}
    assert gate.calls["gate"] == 2  # re-executed after the reset, never double-completed


async def test_the_header_written_at_creation_reads_back_as_the_execution_it_describes(
    hot_state: HotState, durable: SqliteDurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await rig.engine.create_execution(PIPELINE, {"topic": ["a", 1, None]}, TENANT_A)
    meta = await rig.dag_store.load_meta(execution_id)
    header = await rig.audit.checkpoints.read_header(execution_id, TENANT_A.tenant_id)
    assert meta is not None and header is not None
    assert parse_pipeline(header.pipeline) == PIPELINE
    assert (header.execution_id, header.tenant_id, header.state) == (
        execution_id,
        "tenant-a",
        {"topic": ["a", 1, None]},
    )
    assert header.context == TENANT_A.model_dump(mode="json")
    assert header.created_at_ms == meta.created_at_ms
