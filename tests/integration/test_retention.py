"""Payload externalization, the layered resolver and retention, against real Redis and a real
durable store (SQLite and PostgreSQL).

Stated memory bound (test_500_step_pipeline_...): with results kept inline (externalization
threshold above 64 KiB) and `retention.hybrid.default` triggered every 8 completed steps,
the Redis memory of one 500-step execution with 64 KiB results (sum of `MEMORY USAGE` over
all of its keys) never exceeds 2 MiB, sampled after every completed step; without retention
it would exceed 500 x 64 KiB = 32 MiB.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.audit import AuditSettings, resolve_view
from runtime_core.dag import (
    DagEngine,
    DagStore,
    EngineEvent,
    StepStatus,
    execution_fingerprint,
)
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.policy import PolicyKind, RetryEngine, UnknownPolicyError, default_policy_registry
from runtime_core.retention import (
    COMPACT_POLICY,
    EVICT_POLICY,
    HYBRID_POLICY,
    REF_MARKER,
    ExternalizationSettings,
    RetentionEngine,
    RetentionStats,
    RetentionStrategy,
    register_retention_policies,
)
from runtime_core.steps import default_executor_registry
from runtime_core.storage import DurableStore
from tests.durable_backends import SQL_BACKENDS, DurableBackend, sql_backend
from tests.integration.audit_support import (
    KIB,
    TENANT_A,
    BigResultExecutor,
    Rig,
    execution_memory_bytes,
    make_rig,
)

INLINE = AuditSettings(externalization=ExternalizationSettings(threshold_bytes=1024 * KIB))
MEMORY_BOUND_BYTES = 2 * 1024 * KIB


@pytest.fixture(params=SQL_BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DurableBackend]:
    async with sql_backend(request, request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def durable(backend: DurableBackend) -> DurableStore:
    return backend.store


def lanes_pipeline(
    lanes: int, depth: int, retention: dict | None, size: int = 64 * KIB
) -> PipelineDefinition:
    """`lanes` independent chains of `depth` test.big steps; each reads its predecessor's data."""
    steps = []
    for lane in range(lanes):
        for level in range(depth):
            step = {"name": f"l{lane}d{level:03d}", "stepKey": "test.big", "config": {"sizeBytes": size}}
            if level:
                previous = f"l{lane}d{level - 1:03d}"
                step |= {"dependsOn": [previous], "input": {"previous": f"steps.{previous}.result.data"}}
            steps.append(step)
    config = {"retention": retention} if retention else {}
    return parse_pipeline({"name": "lanes", "config": config, "steps": steps})


class MemorySampler:
    """Observer appended after retention: samples the execution's Redis memory per completion."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.peak = 0

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "step.completed":
            self.peak = max(self.peak, await execution_memory_bytes(self.rig, event.execution_id))


async def test_a_result_above_the_threshold_is_stored_durably_with_only_a_ref_in_redis(
    hot_state: HotState, durable: DurableStore
) -> None:
    rig = make_rig(hot_state, durable)
    execution_id = await rig.engine.create_execution(lanes_pipeline(1, 2, None, 20 * KIB), {}, TENANT_A)
    assert await rig.engine.run(execution_id, workers=1) == "Completed"
    hot = await hot_state.redis.hgetall(rig.dag_store.keys(execution_id).result)
    refs = {name: json.loads(text) for name, text in hot.items()}
    assert all(
        set(ref) == {REF_MARKER, "sha256", "size"} and len(text) < 200
        for ref, text in zip(refs.values(), hot.values(), strict=True)
    )
    body = await durable.get_payload(refs["l0d001"][REF_MARKER], TENANT_A.tenant_id)
    assert body is not None and json.loads(body)["data"]["depth"] == 1
    assert await durable.get_payload(refs["l0d001"][REF_MARKER], "tenant-b") is None


async def test_500_step_pipeline_with_64kib_results_keeps_redis_memory_bounded_and_binds_correctly(
    hot_state: HotState, durable: DurableStore
) -> None:
    retention = {"policies": [HYBRID_POLICY], "triggers": {"completedSteps": 8}}
    rig = make_rig(hot_state, durable, settings=INLINE)
    sampler = MemorySampler(rig)
    rig.audit.observer.add(sampler)
    execution_id = await rig.engine.create_execution(lanes_pipeline(10, 50, retention), {}, TENANT_A)

    assert await rig.engine.run(execution_id, workers=4) == "Completed"

    assert 0 < sampler.peak < MEMORY_BOUND_BYTES
    assert await execution_memory_bytes(rig, execution_id) < MEMORY_BOUND_BYTES
    view = await rig.dag_store.read_execution(execution_id)
    assert view is not None and len(view.steps) == 500
    resolved = {s.name: s.result for s in (await resolve_view(view, rig.audit.resolver)).steps}
    assert all(resolved[f"l{lane}d049"]["data"]["depth"] == 49 for lane in range(10))
    assert all(len(result["data"]["blob"]) == 64 * KIB for result in resolved.values())
    assert rig.audit.metrics.value("mcprt_retention_actions_total", {"action": "evict"}) > 400


async def test_evicted_results_still_bind_to_descendants_that_read_them_later(
    hot_state: HotState, durable: DurableStore
) -> None:
    pipeline = parse_pipeline(
        {
            "name": "grandparent",
            "config": {"retention": {"policies": [EVICT_POLICY], "triggers": {"completedSteps": 1}}},
            "steps": [
                {"name": "a", "stepKey": "test.big", "config": {"sizeBytes": 1000}},
                {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
                {"name": "c", "stepKey": "test.noop", "dependsOn": ["b"]},
                {
                    "name": "d",
                    "stepKey": "test.big",
                    "dependsOn": ["c"],
                    "input": {"grandparent": "steps.a.result.data"},
                    "config": {"sizeBytes": 1000},
                },
            ],
        }
    )
    rig = make_rig(hot_state, durable, settings=INLINE)
    execution_id = await rig.engine.create_execution(pipeline, {}, TENANT_A)
    assert await rig.engine.run(execution_id, workers=2) == "Completed"
    view = await rig.dag_store.read_execution(execution_id)
    assert view is not None
    assert {s.name for s in view.steps if s.result is None} >= {"a", "b", "c"}  # evicted from Redis
    resolved = {s.name: s.result for s in (await resolve_view(view, rig.audit.resolver)).steps}
    assert resolved["d"]["data"]["depth"] == 1 and resolved["a"]["data"]["step"] == "a"


async def test_externalization_and_retention_do_not_change_the_fingerprint(
    hot_state: HotState, durable: DurableStore, redis_server
) -> None:
    retention = {"policies": [HYBRID_POLICY], "triggers": {"completedSteps": 2}}
    pipeline = lanes_pipeline(2, 4, retention, size=2 * KIB)
    tiny_threshold = AuditSettings(externalization=ExternalizationSettings(threshold_bytes=256))
    rig = make_rig(hot_state, durable, settings=tiny_threshold)
    execution_id = await rig.engine.create_execution(pipeline, {}, TENANT_A)
    assert await rig.engine.run(execution_id, workers=2) == "Completed"
    snapshot = await durable.get_snapshot(execution_id, TENANT_A.tenant_id)

    plain_state = connect_hot_state(redis_server.url, prefix=hot_state.prefix + "plain:")
    try:
        registry = default_executor_registry()
        registry.register(BigResultExecutor())
        plain = DagEngine(DagStore(plain_state), registry, RetryEngine())
        await plain.create_execution(pipeline, {}, TENANT_A, execution_id=execution_id)
        assert await plain.run(execution_id, workers=1) == "Completed"
        plain_view = await plain.store.read_execution(execution_id)
    finally:
        await plain_state.close()
    assert plain_view is not None and snapshot is not None
    assert execution_fingerprint(plain_view) == snapshot.fingerprint


@pytest.mark.parametrize("damage", ["corrupted", "missing"])
async def test_a_damaged_payload_is_a_typed_resolver_failure_retried_then_failed(
    hot_state: HotState, backend: DurableBackend, damage: str
) -> None:
    pipeline = parse_pipeline(
        {
            "name": "damaged",
            "steps": [
                {"name": "big", "stepKey": "test.big", "config": {"sizeBytes": 20 * KIB}},
                {
                    "name": "reader",
                    "stepKey": "test.big",
                    "dependsOn": ["big"],
                    "input": {"upstream": "steps.big.result.data"},
                    "config": {"sizeBytes": 20 * KIB, "retry": {"maxRetries": 2, "baseDelayMs": 1}},
                },
            ],
        }
    )
    rig = make_rig(hot_state, backend.store, settings=AuditSettings(cache_max_bytes=0))
    execution_id = await rig.engine.create_execution(pipeline, {}, TENANT_A)
    claim = (
        await rig.dag_store.claim_step(execution_id, "big", lease_ms=10_000, worker_id="w", token_prefix="t")
    ).claims[0]
    result = {"data": {"step": "big", "depth": 0, "blob": "b" * 20 * KIB}}
    stored = await rig.audit.codec.encode(execution_id, "big", result, TENANT_A)
    await rig.dag_store.complete_step(claim, stored)
    await backend.damage_payload(stored[REF_MARKER], b"tampered" if damage == "corrupted" else None)

    assert await rig.engine.run(execution_id, workers=2) == "Failed"

    view = await rig.dag_store.read_execution(execution_id)
    assert view is not None
    reader = next(s for s in view.steps if s.name == "reader")
    assert (reader.status, reader.retry_count, reader.error["code"]) == (StepStatus.FAILED, 2, "resolver")
    ledger = await rig.audit.queries.ledger(TENANT_A, execution_id=execution_id)
    outcomes = [e.event for e in ledger if e.step_name == "reader" and e.event != "step.claimed"]
    assert outcomes == ["step.retry_scheduled", "step.retry_scheduled", "step.failed"]


def test_the_three_retention_policies_are_registered_by_kind() -> None:
    registry = register_retention_policies(default_policy_registry())
    assert registry.names(PolicyKind.RETENTION) == sorted([COMPACT_POLICY, EVICT_POLICY, HYBRID_POLICY])


def test_an_unknown_retention_policy_is_rejected_with_the_registered_names() -> None:
    with pytest.raises(UnknownPolicyError) as error:
        RetentionEngine().validate({"retention": ["retention.nope"]})
    assert HYBRID_POLICY in str(error.value)


@pytest.mark.parametrize(
    ("section", "stats", "expected"),
    [
        ({"policies": [COMPACT_POLICY], "triggers": {"completedSteps": 4}}, (4, 0, 0), "completedSteps"),
        ({"policies": [COMPACT_POLICY], "triggers": {"completedSteps": 4}}, (3, 0, 0), None),
        ({"policies": [EVICT_POLICY], "triggers": {"payloadBytes": 1000}}, (1, 1000, 0), "payloadBytes"),
        ({"policies": [HYBRID_POLICY], "triggers": {"durationMs": 50}}, (1, 0, 60), "durationMs"),
        ({"policies": [HYBRID_POLICY], "triggers": {"durationMs": 50}}, (0, 0, 60), None),
        (
            {"policies": [{"name": EVICT_POLICY, "config": {"triggers": {"completedSteps": 2}}}]},
            (2, 0, 0),
            "completedSteps",
        ),
    ],
)
def test_a_retention_trigger_fires_only_when_its_threshold_is_reached(
    section: dict, stats: tuple[int, int, int], expected: str | None
) -> None:
    engine = RetentionEngine()
    config = engine.validate({"retention": section})
    assert config is not None
    since_pass, result_bytes, age_ms = stats
    decision = engine.decide(config, RetentionStats(10, since_pass, result_bytes, age_ms))
    assert (decision.trigger if decision else None) == expected
    if decision is not None:
        assert decision.strategy is RetentionStrategy(decision.policy.split(".")[1])
