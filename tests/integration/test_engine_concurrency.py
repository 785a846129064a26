"""The concurrency gate in the engine's claim path (control gate -> policy admission -> lease ->
DAG claim), proven against a real redis-server with several workers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime_core.concurrency import CONCURRENCY_HASH_TAG, ConcurrencyGate, LeaseGrant
from runtime_core.dag import ClaimOutcome
from runtime_core.dag._gated_path import GatedPath
from runtime_core.dag._step_runner import StepRunner
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import HotState
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from tests.helpers import wait_until
from tests.integration.control_support import (
    TENANT_A,
    HoldExecutor,
    QueueExecutor,
    RecordingObserver,
    controlled_runtime,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")

OPENAI = {"provider": "openai", "model": "gpt-4.1", "operation": "llm.chat"}


def _pipeline(concurrency: dict[str, Any], *, steps: int, step_key: str = "test.queue") -> PipelineDefinition:
    return parse_pipeline(
        {
            "name": "gated",
            "config": {"concurrency": concurrency},
            "steps": [{"name": f"s{i:02d}", "stepKey": step_key, "config": OPENAI} for i in range(steps)],
        }
    )


def _throttle(**config: Any) -> dict[str, Any]:
    return {"name": "concurrency.throttle", "config": config}


def _scope_key(hot_state: HotState, *parts: str) -> str:
    return hot_state.tagged(":".join((CONCURRENCY_HASH_TAG, *parts)), "scope")


async def _events(observer: RecordingObserver, name: str) -> bool:
    return bool(observer.named(name))


async def test_provider_limit_two_with_eight_workers_never_runs_more_than_two_and_completes_all(
    hot_state: HotState,
) -> None:
    executor = QueueExecutor()
    runtime = controlled_runtime(hot_state, executor)
    pipeline = _pipeline(
        {"policies": [_throttle(scope="provider", target="openai", limit=2)], "defaultRetryAfterMs": 20},
        steps=20,
    )
    execution_id = await runtime.engine.create_execution(pipeline, {}, TENANT_A)
    running = asyncio.create_task(runtime.engine.run(execution_id, workers=8))

    for released in range(20):
        await wait_until(lambda r=released: _unreleased_at_least(executor, min(2, 20 - r)))
        executor.release_oldest()

    assert await running == "Completed"
    assert (executor.completed, executor.max_running) == (20, 2)
    denial = runtime.observer.named("step.lease_denied")[0].attributes
    key = _scope_key(hot_state, "provider", "openai")
    assert denial["reason"] == f"Concurrency limit reached for scope '{key}'. Current='2', Limit='2'."
    assert (denial["retry_after_ms"], denial["scope_key"]) == (20, key)
    assert await hot_state.redis.zcard(key) == 0  # every lease was released


async def _unreleased_at_least(executor: QueueExecutor, count: int) -> bool:
    return await executor.unreleased() >= count


async def test_denied_admission_policy_acquires_no_lease_and_claims_nothing(hot_state: HotState) -> None:
    executor = HoldExecutor()
    runtime = controlled_runtime(hot_state, executor)
    admission = {
        "name": "concurrency.provider.admission",
        "config": {"allowedProviders": ["anthropic"], "retryAfterMs": 30},
    }
    pipeline = _pipeline(
        {"maxProviderConcurrency": 5, "policies": [admission]}, steps=1, step_key="test.hold"
    )
    execution_id = await runtime.engine.create_execution(pipeline, {}, TENANT_A)
    running = asyncio.create_task(runtime.engine.run(execution_id, workers=2))

    await wait_until(lambda: _events(runtime.observer, "step.admission_denied"))

    denial = runtime.observer.named("step.admission_denied")[0]
    assert denial.attributes["reason"] == "Provider 'openai' is blocked by concurrency policy."
    assert (denial.attributes["retry_after_ms"], denial.attributes["policy"]) == (
        30,
        "concurrency.provider.admission",
    )
    assert await hot_state.redis.keys(_scope_key(hot_state, "*")) == []  # no lease in any scope
    view = await runtime.store.read_execution(execution_id)
    assert view is not None and (view.steps[0].status, view.steps[0].owned) == ("Ready", False)
    assert executor.calls == [] and not runtime.observer.named("step.claimed")
    await runtime.control.cancel(execution_id, TENANT_A)
    assert await running == "Cancelled"


async def test_killed_worker_lease_expires_and_capacity_comes_back(hot_state: HotState) -> None:
    executor = HoldExecutor()
    runtime = controlled_runtime(hot_state, executor)
    concurrency = {"maxProviderConcurrency": 1, "leaseSeconds": 1, "defaultRetryAfterMs": 50}
    pipeline = _pipeline(concurrency, steps=1, step_key="test.hold")
    execution_id = await runtime.engine.create_execution(pipeline, {}, TENANT_A)
    # A worker takes the lease and claims the step, then dies without releasing either.
    effective = (await runtime.engine._load(execution_id)).gates.effective["s00"]
    dead = await ConcurrencyGate(hot_state).try_acquire(effective, "dead-worker-lease")
    assert isinstance(dead, LeaseGrant)
    claimed = await runtime.store.claim_step(
        execution_id, "s00", lease_ms=50, worker_id="dead", token_prefix="dead"
    )
    assert claimed.outcome is ClaimOutcome.CLAIMED

    assert await runtime.engine.run(execution_id, workers=2) == "Completed"

    denial = runtime.observer.named("step.lease_denied")[0].attributes
    assert (denial["current"], denial["limit"]) == (1, 1)  # the dead worker's lease blocked first
    key = _scope_key(hot_state, "provider", "openai")
    assert await hot_state.redis.zscore(key, "dead-worker-lease") is None  # expired and removed
    view = await runtime.store.read_execution(execution_id)
    assert view is not None and (view.steps[0].status, view.steps[0].recovery_count) == ("Completed", 1)
    assert executor.calls == ["s00"]


async def test_lease_acquired_for_a_claim_another_worker_won_is_released_at_once(hot_state: HotState) -> None:
    runtime = controlled_runtime(hot_state, HoldExecutor())
    pipeline = _pipeline({"maxProviderConcurrency": 1}, steps=1, step_key="test.hold")
    execution_id = await runtime.engine.create_execution(pipeline, {}, TENANT_A)
    run = await runtime.engine._load(execution_id)
    winner = await runtime.store.claim_step(
        execution_id, "s00", lease_ms=60_000, worker_id="winner", token_prefix="win"
    )
    assert winner.outcome is ClaimOutcome.CLAIMED

    loser = StepRunner(runtime.engine.worker_context(), run, "loser", "lose")
    attempted = await GatedPath(loser).claim("s00", winner.now_ms)

    assert attempted is False
    [released] = runtime.observer.named("step.lease_released")
    assert released.attributes["reason"] == "claim not won: NOT_CLAIMABLE"
    assert await hot_state.redis.zcard(_scope_key(hot_state, "provider", "openai")) == 0


async def test_only_steps_with_limits_or_admission_policies_take_the_gated_claim_path(
    hot_state: HotState,
) -> None:
    runtime = controlled_runtime(hot_state, HoldExecutor())
    mixed = parse_pipeline(
        {
            "name": "mixed",
            "config": {"concurrency": {"policies": [_throttle(scope="provider", target="openai", limit=3)]}},
            "steps": [
                {"name": "llm", "stepKey": "test.hold", "config": OPENAI},
                {"name": "local", "stepKey": "test.hold", "config": {"provider": "relational"}},
                {"name": "after", "stepKey": "test.hold", "dependsOn": ["llm", "local"]},
            ],
        }
    )
    parallel_only = parse_pipeline(
        {
            "name": "dop",
            "config": {"concurrency": {"maxDegreeOfParallelism": 4}},
            "steps": [{"name": "a", "stepKey": "test.hold", "config": OPENAI}],
        }
    )
    mixed_id = await runtime.engine.create_execution(mixed, {}, TENANT_A)
    dop_id = await runtime.engine.create_execution(parallel_only, {}, TENANT_A)

    assert set((await runtime.engine._load(mixed_id)).gates.effective) == {"llm"}
    assert not (await runtime.engine._load(dop_id)).gates.active  # batch fast path
    assert await runtime.engine.run(mixed_id, workers=4) == "Completed"
    assert await runtime.engine.run(dop_id, workers=4) == "Completed"


@pytest.mark.parametrize(
    ("step_config", "fragment"),
    [
        ({"retry": {"maxRetries": 2, "policies": ["retry.nope"]}}, "retry.nope"),
        ({"concurrency": {"policies": [{"name": "concurrency.nope", "config": {}}]}}, "concurrency.nope"),
        ({"concurrency": {"maxProviderConcurrency": -1}}, "config.concurrency"),
    ],
)
async def test_bad_retry_or_concurrency_policy_is_rejected_at_create_with_nothing_written(
    hot_state: HotState, step_config: dict[str, Any], fragment: str
) -> None:
    runtime = controlled_runtime(hot_state)
    pipeline = parse_pipeline(
        {"name": "bad", "steps": [{"name": "a", "stepKey": "test.noop", "config": step_config}]}
    )

    with pytest.raises(InvalidPipelineError) as caught:
        await runtime.engine.create_execution(pipeline, {}, TENANT_A)

    assert caught.value.rule == "policies_valid"
    assert fragment in caught.value.message and caught.value.message.startswith("Step 'a':")
    assert await hot_state.redis.keys(hot_state.prefix + "*") == []
