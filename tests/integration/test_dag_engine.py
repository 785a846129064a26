"""Worker rows of seed 000's scenario table, proven against a real redis-server."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from runtime_core.dag import (
    ClaimOutcome,
    DagEngine,
    DagStore,
    EngineEvent,
    EngineSettings,
    ExecutionMeta,
    TransitionOutcome,
    execution_fingerprint,
)
from runtime_core.dag._step_runner import StepRunner
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.steps import StepInvocation, default_executor_registry
from tests.helpers import CountingExecutor, command_calls, fan_out_pipeline, wait_until

pytestmark = pytest.mark.redis_kinds("single", "cluster")

SNAPSHOT = ExecutionContextSnapshot(user_id="u-1", tenant_id="tenant-a")
FINALIZERS = 6


def make_engine(hot_state: HotState, *extra_executors: object, lease_ms: int = 60_000) -> DagEngine:
    registry = default_executor_registry()
    for executor in extra_executors:
        registry.register(executor)  # type: ignore[arg-type]
    return DagEngine(DagStore(hot_state), registry, RetryEngine(), settings=EngineSettings(lease_ms=lease_ms))


ONE_STEP = parse_pipeline({"name": "one", "steps": [{"name": "only", "stepKey": "test.noop"}]})

FINGERPRINT_PIPELINE = parse_pipeline(
    {
        "name": "fingerprint",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "b", "stepKey": "test.noop"},
            {
                "name": "flaky",
                "stepKey": "test.flaky",
                "dependsOn": ["a"],
                "config": {"failTimes": 2, "retry": {"maxRetries": 3, "baseDelayMs": 5}},
            },
            *[{"name": f"fan{i}", "stepKey": "test.noop", "dependsOn": ["a", "b"]} for i in range(12)],
            {
                "name": "merge",
                "stepKey": "rag.merge",
                "dependsOn": ["flaky", *[f"fan{i}" for i in range(12)]],
                "config": {"sourceSteps": ["flaky", "fan0", "fan11"]},
            },
        ],
    }
)


async def test_two_workers_racing_for_one_step_exactly_one_wins(hot_state: HotState, redis_target) -> None:
    other = connect_hot_state(redis_target.url, prefix=hot_state.prefix)
    store_a, store_b = DagStore(hot_state), DagStore(other)
    engine = make_engine(hot_state)
    try:
        for _ in range(200):
            execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT)
            results = await asyncio.gather(
                store_a.claim_step(execution_id, "only", lease_ms=10_000, worker_id="A", token_prefix="a"),
                store_b.claim_step(execution_id, "only", lease_ms=10_000, worker_id="B", token_prefix="b"),
            )
            winners = [r for r in results if r.outcome is ClaimOutcome.CLAIMED]
            assert len(winners) == 1
            loser = next(r for r in results if r.outcome is not ClaimOutcome.CLAIMED)
            assert loser.outcome is ClaimOutcome.NOT_CLAIMABLE
    finally:
        await other.close()


async def test_stale_worker_completion_is_rejected_by_claim_token(hot_state: HotState) -> None:
    engine = make_engine(hot_state)
    store = engine.store
    execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT)
    stale = (
        await store.claim_step(execution_id, "only", lease_ms=30, worker_id="A", token_prefix="a")
    ).claims[0]

    async def lease_expired() -> bool:
        return await hot_state.server_time_ms() > stale.claimed_at_ms + 30

    await wait_until(lease_expired)
    assert await store.recover_stale(execution_id) == ["only"]
    fresh = (
        await store.claim_step(execution_id, "only", lease_ms=10_000, worker_id="B", token_prefix="b")
    ).claims[0]
    assert fresh.token != stale.token
    late = await store.complete_step(stale, {"data": "from stale worker A"})
    assert late.outcome is TransitionOutcome.STALE_TOKEN
    assert (await store.complete_step(fresh, {"data": "from B"})).outcome is TransitionOutcome.APPLIED
    view = await store.read_execution(execution_id)
    assert view is not None and view.steps[0].result == {"data": "from B"}
    assert (await store.complete_step(stale, {"data": "again"})).outcome is TransitionOutcome.NOT_RUNNING


async def test_crashed_worker_step_is_recovered_and_completed_with_retry_count_unchanged(
    hot_state: HotState,
) -> None:
    engine = make_engine(hot_state)
    execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT)
    crashed = await engine.store.claim_step(
        execution_id, "only", lease_ms=50, worker_id="dead", token_prefix="x"
    )
    assert crashed.outcome is ClaimOutcome.CLAIMED  # the "worker" now dies without completing
    status = await engine.run(execution_id, workers=2)
    view = await engine.store.read_execution(execution_id)
    assert status == "Completed" and view is not None
    step = view.steps[0]
    assert (step.status, step.retry_count, step.recovery_count) == ("Completed", 0, 1)


async def test_flaky_step_waits_for_its_retry_window_then_succeeds(hot_state: HotState) -> None:
    pipeline = parse_pipeline(
        {
            "name": "flaky",
            "steps": [
                {
                    "name": "f",
                    "stepKey": "test.flaky",
                    "config": {
                        "failTimes": 2,
                        "retry": {"maxRetries": 3, "baseDelayMs": 400, "strategy": "Fixed"},
                    },
                }
            ],
        }
    )
    engine = make_engine(hot_state)
    store = engine.store
    execution_id = await engine.create_execution(pipeline, {}, SNAPSHOT)
    batch = await store.claim_ready_steps(
        execution_id, max_steps=1, lease_ms=5000, worker_id="w", token_prefix="t"
    )
    run = await engine._load(execution_id)
    await StepRunner(engine.worker_context(), run, "w", "t").execute(batch.claims[0])
    early = await store.claim_step(execution_id, "f", lease_ms=5000, worker_id="w", token_prefix="t")
    assert early.outcome is ClaimOutcome.RETRY_WINDOW_CLOSED
    assert await engine.run(execution_id, workers=2) == "Completed"
    view = await store.read_execution(execution_id)
    assert view is not None and (view.steps[0].status, view.steps[0].retry_count) == ("Completed", 2)


async def test_flaky_step_fails_after_exhausting_retries(hot_state: HotState) -> None:
    pipeline = parse_pipeline(
        {
            "name": "flaky",
            "steps": [
                {
                    "name": "f",
                    "stepKey": "test.flaky",
                    "config": {"failTimes": 5, "retry": {"maxRetries": 2, "baseDelayMs": 1}},
                },
                {"name": "after", "stepKey": "test.noop", "dependsOn": ["f"]},
                {"name": "independent", "stepKey": "test.noop"},
            ],
        }
    )
    engine = make_engine(hot_state)
    execution_id = await engine.create_execution(pipeline, {}, SNAPSHOT)
    assert await engine.run(execution_id, workers=3) == "Failed"
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    by_name = {s.name: s for s in view.steps}
    assert (by_name["f"].status, by_name["f"].retry_count) == ("Failed", 2)
    assert by_name["f"].error["code"] == "transient"
    assert by_name["after"].status == "Pending"  # never ran: its dependency failed
    assert by_name["independent"].status == "Completed"  # independent branches still converge


async def test_a_missing_retrieval_id_fails_at_once_while_a_transient_failure_is_retried(
    hot_state: HotState,
) -> None:
    retry = {"maxRetries": 3, "baseDelayMs": 1}  # no policies: the engine's default classification
    pipeline = parse_pipeline(
        {
            "name": "missing-id",
            "steps": [
                {
                    "name": "candidate",
                    "stepKey": "rag.retrieval",
                    "input": {"candidateId": "state.candidateId"},
                    "config": {"operation": "candidate.byId", "providerKey": "default", "retry": retry},
                },
                {"name": "flaky", "stepKey": "test.flaky", "config": {"failTimes": 2, "retry": retry}},
            ],
        }
    )
    engine = make_engine(hot_state)
    execution_id = await engine.create_execution(pipeline, {"candidateId": "c-404"}, SNAPSHOT)
    assert await engine.run(execution_id, workers=2) == "Failed"
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    by_name = {s.name: s for s in view.steps}
    assert (by_name["candidate"].status, by_name["candidate"].retry_count) == ("Failed", 0)
    assert by_name["candidate"].error["code"] == "not_found"
    assert (by_name["flaky"].status, by_name["flaky"].retry_count) == ("Completed", 2)


@pytest.mark.parametrize(
    ("definition", "rule", "fragment"),
    [
        ({"steps": [{"name": "a", "stepKey": "test.noop"}]}, "name_present", "name is missing"),
        ({"name": "p", "steps": []}, "steps_present", "no steps"),
        (
            {
                "name": "p",
                "steps": [{"name": "a", "stepKey": "test.noop"}, {"name": "a", "stepKey": "test.noop"}],
            },
            "step_names_unique",
            "'a'",
        ),
        (
            {"name": "p", "steps": [{"name": "a", "stepKey": "test.noop", "dependsOn": ["ghost"]}]},
            "dependencies_exist",
            "'ghost'",
        ),
        (
            {
                "name": "p",
                "steps": [
                    {"name": "a", "stepKey": "test.noop", "dependsOn": ["c"]},
                    {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
                    {"name": "c", "stepKey": "test.noop", "dependsOn": ["b"]},
                ],
            },
            "no_cycle",
            "a -> c -> b -> a",
        ),
        (
            {"name": "p", "steps": [{"name": "a", "stepKey": "nope.unknown"}]},
            "step_keys_registered",
            "nope.unknown",
        ),
        (
            {"name": "p", "steps": [{"name": "a", "stepKey": "test.noop", "input": {"x": "steps.a"}}]},
            "bindings_parse",
            "steps.<name>.result",
        ),
        (
            {
                "name": "p",
                "steps": [
                    {"name": "a", "stepKey": "test.noop"},
                    {"name": "b", "stepKey": "test.noop", "input": {"x": "steps.a.result.data"}},
                ],
            },
            "bindings_parse",
            "not one of its (transitive) dependencies",
        ),
    ],
)
async def test_invalid_pipeline_is_rejected_with_the_named_rule_and_nothing_written(
    hot_state: HotState, definition: dict, rule: str, fragment: str
) -> None:
    engine = make_engine(hot_state)
    with pytest.raises(InvalidPipelineError) as caught:
        await engine.create_execution(parse_pipeline(definition), {}, SNAPSHOT)
    assert caught.value.rule == rule
    assert fragment in caught.value.message
    assert await hot_state.redis.keys(hot_state.prefix + "*") == []


async def test_pipeline_that_is_not_json_is_a_typed_error() -> None:
    with pytest.raises(InvalidPipelineError) as caught:
        parse_pipeline("{not json")
    assert caught.value.rule == "json"


async def _fingerprint_run(redis_url: str, execution_id: str, workers: int, *, crash: bool = False) -> str:
    hot_state = connect_hot_state(redis_url, prefix=f"fp{secrets.token_hex(4)}:")
    try:
        engine = make_engine(hot_state)
        await engine.create_execution(FINGERPRINT_PIPELINE, {"x": 1}, SNAPSHOT, execution_id=execution_id)
        if crash:
            claimed = await engine.store.claim_step(
                execution_id, "b", lease_ms=40, worker_id="dies", token_prefix="d"
            )
            assert claimed.outcome is ClaimOutcome.CLAIMED
        assert await engine.run(execution_id, workers=workers) == "Completed"
        view = await engine.store.read_execution(execution_id)
        assert view is not None
        if crash:
            assert next(s for s in view.steps if s.name == "b").recovery_count == 1
        return execution_fingerprint(view)
    finally:
        await hot_state.close()


async def test_terminal_fingerprint_is_identical_for_1_4_8_workers_and_an_injected_crash(
    redis_target,
) -> None:
    execution_id = "exec_fingerprint0001"
    prints = {
        label: await _fingerprint_run(redis_target.url, execution_id, workers, crash=crash)
        for label, workers, crash in [("1", 1, False), ("4", 4, False), ("8", 8, False), ("crash", 4, True)]
    }
    assert len(set(prints.values())) == 1, prints


async def test_200_step_fan_out_with_8_workers_executes_every_step_exactly_once(hot_state: HotState) -> None:
    counter = CountingExecutor()
    engine = make_engine(hot_state, counter)
    pipeline = fan_out_pipeline(198, step_key=counter.step_key)
    assert len(pipeline.steps) == 200
    execution_id = await engine.create_execution(pipeline, {}, SNAPSHOT)
    assert await engine.run(execution_id, workers=8) == "Completed"
    assert len(counter.calls) == 200
    assert set(counter.calls.values()) == {1}
    assert counter.max_active > 1  # the workers really ran in parallel


async def test_many_isolated_executions_run_side_by_side(hot_state: HotState) -> None:
    counter = CountingExecutor()
    engine = make_engine(hot_state, counter)
    pipeline = fan_out_pipeline(10, step_key=counter.step_key)
    ids = [await engine.create_execution(pipeline, {"n": n}, SNAPSHOT) for n in range(10)]
    statuses = await asyncio.gather(*(engine.run(eid, workers=3) for eid in ids))
    assert statuses == ["Completed"] * 10
    assert len(counter.calls) == 10 * 12 and set(counter.calls.values()) == {1}


async def test_finalization_happens_exactly_once(hot_state: HotState, redis_target) -> None:
    """Finalizers on separate connections race on each execution the moment it converges
    (its last step completed, nobody finalized yet): exactly one of them finalizes it."""
    racers = [connect_hot_state(redis_target.url, prefix=hot_state.prefix) for _ in range(FINALIZERS)]
    engine = make_engine(hot_state)
    try:
        for _ in range(30):
            execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT)
            batch = await engine.store.claim_step(
                execution_id, "only", lease_ms=10_000, worker_id="A", token_prefix="a"
            )
            completed = await engine.store.complete_step(batch.claims[0], {"data": "done"})
            assert completed.converged and await engine.store.execution_status(execution_id) == "Running"
            outcomes = await asyncio.gather(*(DagStore(racer).finalize(execution_id) for racer in racers))
            assert sorted(finalization.outcome.name for finalization in outcomes) == ["ALREADY_FINAL"] * (
                FINALIZERS - 1
            ) + ["FINALIZED"]
            assert {finalization.status for finalization in outcomes} == {"Completed"}
    finally:
        await asyncio.gather(*(racer.close() for racer in racers))


class FinalizationCounter:
    def __init__(self) -> None:
        self.finalized: list[str] = []

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "execution.finalized":
            self.finalized.append(event.execution_id)


async def test_engines_racing_on_one_execution_finalize_it_once(hot_state: HotState, redis_target) -> None:
    """Three engines (own connections, four workers each) advance the same wide fan-out; every
    one of them sees it converge and tries to finalize: one `execution.finalized` in all."""
    others = [connect_hot_state(redis_target.url, prefix=hot_state.prefix) for _ in range(2)]
    counter = FinalizationCounter()
    engines = [make_engine(state) for state in (hot_state, *others)]
    for engine in engines:
        engine.observer = counter
    try:
        for _ in range(5):
            execution_id = await engines[0].create_execution(fan_out_pipeline(40), {}, SNAPSHOT)
            statuses = await asyncio.gather(*(engine.run(execution_id, workers=4) for engine in engines))
            assert statuses == ["Completed"] * len(engines)
        assert len(counter.finalized) == 5 and len(set(counter.finalized)) == 5
    finally:
        await asyncio.gather(*(other.close() for other in others))


class SlowExecutor:
    """`test.slow`: runs for `holdMs`, longer than the engine's lease (a long LLM call)."""

    step_key = "test.slow"

    def __init__(self) -> None:
        self.calls = 0

    async def execute(self, invocation: StepInvocation) -> dict:
        self.calls += 1
        await asyncio.sleep(invocation.config["holdMs"] / 1000)  # the work itself takes this long
        return {"data": {"step": invocation.step_name}}


async def test_a_step_running_longer_than_its_lease_keeps_it_and_runs_once(hot_state: HotState) -> None:
    slow = SlowExecutor()
    engine = make_engine(hot_state, slow, lease_ms=300)
    pipeline = parse_pipeline(
        {"name": "slow", "steps": [{"name": "s", "stepKey": "test.slow", "config": {"holdMs": 1200}}]}
    )
    execution_id = await engine.create_execution(pipeline, {}, SNAPSHOT)
    # Two workers: the idle one scans for stale leases the whole time the step runs.
    assert await engine.run(execution_id, workers=2) == "Completed"
    view = await engine.store.read_execution(execution_id)
    assert view is not None and (view.steps[0].recovery_count, view.steps[0].retry_count) == (0, 0)
    assert slow.calls == 1


async def test_a_lost_claim_is_not_renewed(hot_state: HotState) -> None:
    engine = make_engine(hot_state)
    store = engine.store
    execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT)
    stale = (
        await store.claim_step(execution_id, "only", lease_ms=30, worker_id="A", token_prefix="a")
    ).claims[0]

    async def lease_expired() -> bool:
        return await hot_state.server_time_ms() > stale.claimed_at_ms + 30

    await wait_until(lease_expired)
    assert await store.recover_stale(execution_id) == ["only"]
    assert await store.renew_step_lease(stale, lease_ms=60_000) is False


async def test_idle_workers_wait_for_the_local_completion_instead_of_polling(hot_state: HotState) -> None:
    """A 100-step chain with 4 workers: one step is claimable at a time, so 3 workers are
    idle throughout. They are woken by the completing worker (only when it released more
    than it takes itself) instead of polling Redis, so a step costs about its own claim +
    complete scripts; polling idle workers used to cost ~7.6 round trips per step."""
    steps = [{"name": "s000", "stepKey": "test.noop"}]
    steps += [
        {"name": f"s{i:03d}", "stepKey": "test.noop", "dependsOn": [f"s{i - 1:03d}"]} for i in range(1, 100)
    ]
    engine = make_engine(hot_state)
    execution_id = await engine.create_execution(
        parse_pipeline({"name": "chain", "steps": steps}), {}, SNAPSHOT
    )
    before = await _script_calls(hot_state)
    assert await engine.run(execution_id, workers=4) == "Completed"
    assert (await _script_calls(hot_state) - before) / 100 < 3.0


async def _script_calls(hot_state: HotState) -> int:
    return await command_calls(hot_state, "cmdstat_evalsha", "cmdstat_eval")


async def test_the_created_metadata_is_what_load_meta_reads_back(hot_state: HotState) -> None:
    """`execution.created` carries the metadata creation stored, so the ledger, snapshot and
    run-event observers need not read it back (three round trips per run start): it must be
    exactly what `load_meta` reads, and a second creation of the same id returns None."""
    store = DagStore(hot_state)
    execution_id = f"exec_{secrets.token_hex(8)}"
    attributes = {"shared_run_id": "srun_meta", "local_run_id": "lrun_meta"}
    created = await store.create_execution(execution_id, FINGERPRINT_PIPELINE, {"x": 1}, SNAPSHOT, attributes)
    loaded = await store.load_meta(execution_id)
    assert created is not None and loaded is not None
    assert created == loaded
    assert await store.create_execution(execution_id, FINGERPRINT_PIPELINE, {"x": 1}, SNAPSHOT) is None


class MetaReadCountingStore(DagStore):
    """The real store, counting how often an execution's metadata is read back."""

    meta_reads = 0

    async def load_meta(self, execution_id: str) -> ExecutionMeta | None:
        self.meta_reads += 1
        return await super().load_meta(execution_id)


async def test_running_a_just_created_execution_does_not_read_its_metadata_back(hot_state: HotState) -> None:
    store = MetaReadCountingStore(hot_state)
    engine = DagEngine(store, default_executor_registry(), RetryEngine(), settings=EngineSettings())
    execution_id = await engine.create_execution(ONE_STEP, {}, SNAPSHOT)
    assert await engine.run(execution_id, workers=1) == "Completed"
    assert store.meta_reads == 0
    # A later run of it (after a park, a restart) reads the stored metadata as before.
    assert await engine.run(execution_id, workers=1) == "Completed"
    assert store.meta_reads == 1


async def test_no_ready_step_waits_behind_a_long_running_step_of_the_same_batch(hot_state: HotState) -> None:
    """A worker may claim several ready steps at once; one that runs long (a model call, a
    step waiting on something) reports the batch's finished steps and hands its not-started
    ones back, so an idle worker runs them while it is still running."""
    from tests.integration.control_plane_support import GateExecutor

    gate = GateExecutor()
    engine = make_engine(hot_state, gate)
    body = [
        {"name": "a", "stepKey": "test.noop"},
        {"name": "hold", "stepKey": "test.gate", "dependsOn": ["a"]},
    ]
    body += [{"name": f"b{i}", "stepKey": "test.noop", "dependsOn": ["a"]} for i in range(6)]
    execution_id = await engine.create_execution(parse_pipeline({"name": "hol", "steps": body}), {}, SNAPSHOT)
    running = asyncio.create_task(engine.run(execution_id, workers=2))
    try:

        async def all_but_hold_completed() -> bool:
            view = await engine.store.read_execution(execution_id)
            statuses = {s.name: s.status for s in view.steps} if view else {}
            others = [status for name, status in statuses.items() if name != "hold"]
            return statuses.get("hold") == "Running" and others == ["Completed"] * 7

        await wait_until(all_but_hold_completed)
        gate.release()
        assert await running == "Completed"
    finally:
        gate.release()
        running.cancel()
