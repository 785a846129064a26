"""A creation that claims its execution's first step for the workers that follow
(`create_execution` with a first claim; `DagEngine.create_execution(claim_first=True)`, the
way a runtime instance's run starts): the claim is the one `advance_steps` would make next,
made only by the call that creates the DAG, never for a gated pipeline, and handed back when
the run does not follow."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from runtime_core.dag import DagEngine, DagStore, EngineSettings, FirstClaim, WorkerPermits
from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.steps import default_executor_registry
from tests.helpers import command_calls, fan_out_pipeline
from tests.integration.control_support import RecordingObserver

pytestmark = pytest.mark.redis_kinds("single", "cluster")

SNAPSHOT = ExecutionContextSnapshot(user_id="u-1", tenant_id="tenant-a")
ONE_STEP = parse_pipeline({"name": "one", "steps": [{"name": "only", "stepKey": "test.noop"}]})
ROOTS = parse_pipeline(
    {
        "name": "roots",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "b", "stepKey": "test.noop"},
            {"name": "c", "stepKey": "test.noop"},
            {"name": "join", "stepKey": "test.noop", "dependsOn": ["a", "b", "c"]},
        ],
    }
)
THROTTLE = {"name": "concurrency.throttle", "config": {"scope": "provider", "target": "openai", "limit": 1}}
GATED = parse_pipeline(
    {
        "name": "gated",
        "config": {"concurrency": {"policies": [THROTTLE]}},
        "steps": [
            {
                "name": "only",
                "stepKey": "test.noop",
                "config": {"provider": "openai", "model": "gpt-4.1", "operation": "llm.chat"},
            }
        ],
    }
)


def _engine(hot_state: HotState) -> DagEngine:
    registry = default_executor_registry()
    return DagEngine(DagStore(hot_state), registry, RetryEngine(), settings=EngineSettings())


async def _statuses(store: DagStore, execution_id: str) -> dict[str, str]:
    view = await store.read_execution(execution_id)
    assert view is not None
    return {step.name: step.status for step in view.steps}


async def _scripts(hot_state: HotState) -> int:
    return await command_calls(hot_state, "cmdstat_evalsha", "cmdstat_eval")


async def test_the_creation_claims_what_advance_would_claim_and_only_once(hot_state: HotState) -> None:
    store = DagStore(hot_state)
    execution_id = f"exec_{secrets.token_hex(8)}"
    first = FirstClaim(max_claim=1, lease_ms=60_000, token_prefix="first")

    created, advanced = await store.create_claiming(execution_id, ROOTS, {}, SNAPSHOT, None, first)

    assert created is not None and advanced is not None
    [claim] = advanced.claims.claims
    assert (claim.step_name, claim.retry_count, claim.dependency_results) == ("a", 0, {})
    assert claim.token.startswith("first.")
    assert advanced.backlog == 2 and not advanced.converged
    expected = {"a": "Running", "b": "Ready", "c": "Ready", "join": "Pending"}
    assert await _statuses(store, execution_id) == expected
    assert created == await store.load_meta(execution_id)  # the metadata as stored, claim sequence too
    # Created once: another creation claims nothing and changes nothing.
    other = FirstClaim(max_claim=1, lease_ms=60_000, token_prefix="other")
    assert await store.create_claiming(execution_id, ROOTS, {}, SNAPSHOT, None, other) == (None, None)
    assert await _statuses(store, execution_id) == expected
    # The claim is a real one: its token completes the step, and the next claims go on from there.
    completed = await store.advance(
        execution_id, [(claim, {"ok": 1})], max_claim=2, lease_ms=60_000, token_prefix="next"
    )
    assert completed.completed[0].outcome.name == "APPLIED"
    assert sorted(c.step_name for c in completed.claims.claims) == ["b", "c"]


async def test_a_creation_sent_again_after_its_reply_was_lost_gets_back_its_claims(
    hot_state: HotState,
) -> None:
    """The same creation again (its reply was lost): the metadata and the claims it made come
    back, leases renewed, and nothing else changes; a plain creation without a claim learns
    only that the DAG exists."""
    store = DagStore(hot_state)
    execution_id = f"exec_{secrets.token_hex(8)}"
    first = FirstClaim.for_creation(execution_id, max_claim=2, lease_ms=60_000)
    created, advanced = await store.create_claiming(execution_id, ROOTS, {}, SNAPSHOT, None, first)
    assert created is not None and advanced is not None
    statuses = await _statuses(store, execution_id)

    again, resent = await store.create_claiming(execution_id, ROOTS, {}, SNAPSHOT, None, first)

    assert again == created and resent is not None

    def held(result: Any) -> list[tuple[str, str, int, dict[str, object]]]:
        return sorted(
            (c.step_name, c.token, c.retry_count, c.dependency_results) for c in result.claims.claims
        )

    assert held(resent) == held(advanced)
    assert resent.backlog == advanced.backlog == 1
    assert await _statuses(store, execution_id) == statuses
    assert await store.create_claiming(execution_id, ROOTS, {}, SNAPSHOT) == (None, None)


async def test_a_run_whose_creation_reply_was_lost_runs_its_first_step_once_without_waiting_for_the_lease(
    hot_state: HotState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Created, reply lost, created again (as a local run retries its creation while Redis
    does not answer): the engine gets the first claim back with its worker permit, announces
    the execution once, and the step runs once, never recovered as a stale claim."""
    engine = _engine(hot_state)
    engine.worker_permits = permits = WorkerPermits(1)
    engine.observer = observer = RecordingObserver()
    create = engine.store.create_claiming
    lost: list[bool] = []

    async def reply_lost_once(*args: object, **kwargs: object) -> object:
        reply = await create(*args, **kwargs)  # type: ignore[arg-type]
        if not lost:
            lost.append(True)
            raise StoreUnavailableError("injected: the connection failed before the reply arrived")
        return reply

    monkeypatch.setattr(engine.store, "create_claiming", reply_lost_once)
    execution_id = f"exec_{secrets.token_hex(8)}"
    with pytest.raises(StoreUnavailableError):
        await engine.create_execution(ONE_STEP, {}, SNAPSHOT, execution_id=execution_id, claim_first=True)
    assert permits.free == 1  # the failed call gave its permit back
    await engine.create_execution(ONE_STEP, {}, SNAPSHOT, execution_id=execution_id, claim_first=True)

    assert await engine.run(execution_id, workers=1) == "Completed"
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    [step] = view.steps
    assert (step.status, step.retry_count, step.recovery_count) == ("Completed", 0, 0)
    assert [e.execution_id for e in observer.named("execution.created")] == [execution_id]
    assert permits.free == 1


async def test_a_one_step_run_created_with_its_claim_takes_two_scripted_calls(hot_state: HotState) -> None:
    """Creation + claim, then completion + finalization: the step runs once, no other call."""
    engine = _engine(hot_state)
    warm_up = await engine.create_execution(ONE_STEP, {}, SNAPSHOT, claim_first=True)
    assert await engine.run(warm_up, workers=1) == "Completed"  # every node has the scripts now
    before = await _scripts(hot_state)
    execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT, claim_first=True)
    assert await engine.run(execution_id, workers=1) == "Completed"
    assert await _scripts(hot_state) - before == 2
    assert await _statuses(engine.store, execution_id) == {"only": "Completed"}


async def test_a_wide_run_created_with_its_claim_completes_every_step_once(hot_state: HotState) -> None:
    engine = _engine(hot_state)
    execution_id = await engine.create_execution(fan_out_pipeline(20), {}, SNAPSHOT, claim_first=True)
    assert await engine.run(execution_id, workers=4) == "Completed"
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    assert {step.status for step in view.steps} == {"Completed"}
    assert {step.retry_count + step.recovery_count for step in view.steps} == {0}


async def test_a_gated_pipeline_is_created_without_a_claim(hot_state: HotState) -> None:
    engine = _engine(hot_state)
    execution_id = await engine.create_execution(GATED, {}, SNAPSHOT, claim_first=True)
    assert await _statuses(engine.store, execution_id) == {"only": "Ready"}
    assert await engine.run(execution_id, workers=1) == "Completed"


async def test_released_first_claims_are_ready_again_without_a_retry_used(hot_state: HotState) -> None:
    """A run cancelled while its creation was on its way hands the claimed step back."""
    engine = _engine(hot_state)
    execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT, claim_first=True)
    assert await _statuses(engine.store, execution_id) == {"only": "Running"}

    await engine.release_first_claims()
    await engine.release_first_claims()  # again (a retry after a failure): nothing more changes

    view = await engine.store.read_execution(execution_id)
    assert view is not None
    [step] = view.steps
    assert (step.status, step.retry_count, step.owned) == ("Ready", 0, False)
    assert await engine.run(execution_id, workers=1) == "Completed"


async def test_the_claimed_step_holds_a_worker_permit_until_its_worker_ran_it(hot_state: HotState) -> None:
    """Claimed with the creation, the step never waits for a worker: the creation took a
    permit first (waiting for one like a worker), the first worker runs it with that permit,
    and a creation whose run does not follow gives the permit back."""
    engine = _engine(hot_state)
    engine.worker_permits = permits = WorkerPermits(1)
    execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT, claim_first=True)
    assert permits.free == 0
    assert await engine.run(execution_id, workers=2) == "Completed"
    assert permits.free == 1

    await engine.create_execution(ONE_STEP, {}, SNAPSHOT, claim_first=True)
    await engine.release_first_claims()
    assert permits.free == 1
    await engine.create_execution(ONE_STEP, {}, SNAPSHOT, claim_first=True)
    engine.drop_first_permit()
    assert permits.free == 1
