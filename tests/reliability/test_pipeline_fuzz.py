"""Issue 9.3: bad pipeline JSON and run input get a typed error and leave nothing in Redis.

Property tests (hypothesis) over pipeline documents: random step graphs (cycles, dangling
and self dependencies, duplicate names), unknown keys, wrong types everywhere, malformed
and very deep bindings, non-JSON values (NaN, Infinity, sets, bytes, lone surrogates),
deep nesting, raw garbage bytes / text, and huge run inputs. `parse_pipeline` followed by
`DagEngine.create_execution` must either succeed or raise a `RuntimeCoreError` subclass,
never another exception, and after a rejection no key may exist in Redis (the module runs
its own redis-server, so "no key at all" is checked, not just a prefix).
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_core.dag import DagEngine, DagStore
from runtime_core.errors import InputTooLargeError, InvalidPipelineError, RuntimeCoreError
from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_JSON_DEPTH,
    MAX_PIPELINE_BYTES,
    PipelineDefinition,
    parse_pipeline,
)
from runtime_core.policy import RetryEngine
from runtime_core.steps import StepInvocation, default_executor_registry
from tests.reliability.exploration import explore, sweep

TENANT = ExecutionContextSnapshot(user_id="fuzz", tenant_id="tenant-fuzz")
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GUARD_EXAMPLES = 60

NAMES = st.sampled_from(["a", "b", "c", "d", "e"]) | st.text(max_size=6)
STEP_KEYS = st.sampled_from(["test.noop", "test.noop", "rag.merge", "nope.unknown", ""])
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    LEAVES,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=16,
)
NOT_JSON = st.sampled_from([float("nan"), float("inf"), -float("inf"), {1, 2}, b"raw", object(), "\ud800"])
ANY_VALUE = JSON_VALUES | NOT_JSON
MALFORMED_BINDINGS = [
    "steps.",
    "state.",
    "steps.a",
    "steps.a.x",
    "steps..result",
    "state..x",
    "steps.b.result.",
]
PATHS = st.lists(st.text(alphabet="abxy01._", max_size=4), max_size=60)
BINDINGS = (
    st.builds(lambda step, path: ".".join(["steps", step, "result", *path]), NAMES, PATHS)
    | st.builds(lambda path: ".".join(["state", *path]), PATHS)
    | st.sampled_from(MALFORMED_BINDINGS)
)
CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "sourceSteps": st.lists(NAMES, max_size=3) | ANY_VALUE,
        "sourceStep": NAMES | ANY_VALUE,
        "retry": st.just({"maxRetries": 2}) | ANY_VALUE,
        "concurrency": st.just({"maxProviderConcurrency": 2}) | ANY_VALUE,
        "timeoutMs": ANY_VALUE,
        "provider": NAMES,
    },
)
STEPS = st.fixed_dictionaries(
    {"name": NAMES, "stepKey": STEP_KEYS},
    optional={
        "dependsOn": st.lists(NAMES, max_size=4) | ANY_VALUE,
        "input": st.dictionaries(st.text(max_size=5), BINDINGS | ANY_VALUE, max_size=4) | ANY_VALUE,
        "config": CONFIGS | ANY_VALUE,
        "order": st.integers() | ANY_VALUE,
        "unexpected": ANY_VALUE,
    },
)
DOCUMENTS = st.fixed_dictionaries(
    {"name": st.sampled_from(["fuzz", ""]) | ANY_VALUE, "steps": st.lists(STEPS, max_size=8) | ANY_VALUE},
    optional={
        "version": st.sampled_from(["1", "2"]) | ANY_VALUE,
        "executionMode": st.sampled_from(["Dag", "Linear"]) | ANY_VALUE,
        "config": st.just({"concurrency": {"maxDegreeOfParallelism": 2}}) | ANY_VALUE,
        "unknownTopLevel": ANY_VALUE,
    },
)


def _deeply_nested(depth: int) -> str:
    inner = "[" * depth + "]" * depth
    return json.dumps({"name": "deep", "steps": [{"name": "a", "stepKey": "test.noop"}]})[:-1] + (
        f',"config":{{"x":{inner}}}}}'
    )


def _as_text(document: dict[str, Any]) -> str | bytes | dict[str, Any]:
    try:
        return json.dumps(document)
    except (TypeError, ValueError):
        return document


# Well-formed chains of test.noop steps (unique names, each depending on the one before, an
# empty config): without them almost every document breaks some rule, and the fuzz would
# rarely reach the engine's acceptance path at all.
WELL_FORMED = st.lists(
    st.text(alphabet="abcdef", min_size=1, max_size=6), min_size=1, max_size=6, unique=True
).map(
    lambda names: {
        "name": "fuzz",
        "steps": [
            {"name": name, "stepKey": "test.noop", **({"dependsOn": [names[i - 1]]} if i else {})}
            for i, name in enumerate(names)
        ],
    }
)
RAW_PIPELINES = (
    WELL_FORMED
    | DOCUMENTS
    | DOCUMENTS.map(_as_text)
    | DOCUMENTS.map(lambda document: {"pipelines": [document]})
    | st.binary(max_size=64)
    | st.text(max_size=64)
    | st.integers(MAX_JSON_DEPTH - 8, 5_000).map(_deeply_nested)
    | ANY_VALUE
)
RUN_INPUTS = (
    st.dictionaries(st.text(max_size=6), ANY_VALUE, max_size=5)
    | ANY_VALUE
    | st.integers(DEFAULT_MAX_INPUT_BYTES - 64, DEFAULT_MAX_INPUT_BYTES + 64).map(lambda n: {"blob": "x" * n})
)


@dataclass
class FuzzRig:
    hot_state: HotState
    engine: DagEngine


class EchoExecutor:
    step_key = "test.echo"

    def __init__(self, result: Any) -> None:
        self.result = result

    async def execute(self, invocation: StepInvocation) -> Any:
        return self.result


@pytest.fixture(scope="module")
async def rig(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FuzzRig]:
    """A private redis-server: after a rejection the whole database must be empty."""
    server = EmbeddedRedis(Path(tmp_path_factory.mktemp("fuzz-redis")), appendonly=False).start()
    hot_state = connect_hot_state(server.url, prefix=f"fuzz{secrets.token_hex(3)}:")
    engine = DagEngine(DagStore(hot_state), default_executor_registry(), RetryEngine())
    try:
        yield FuzzRig(hot_state, engine)
    finally:
        await hot_state.close()
        server.stop()


async def _submit(rig: FuzzRig, raw: Any, state: Any) -> str | None:
    """The ExecutionId, or None when rejected with a typed error (anything else fails the test)."""
    try:
        pipeline = parse_pipeline(raw)
        return await rig.engine.create_execution(pipeline, state, TENANT)
    except RuntimeCoreError:
        return None


@FUZZ
@given(raw=RAW_PIPELINES)
def test_parse_pipeline_returns_a_definition_or_raises_a_typed_error(raw: Any) -> None:
    try:
        assert isinstance(parse_pipeline(raw), PipelineDefinition)
    except RuntimeCoreError:
        pass


@FUZZ
@given(raw=RAW_PIPELINES, state=RUN_INPUTS)
async def test_rejected_submission_is_a_typed_error_and_leaves_no_key_in_redis(
    rig: FuzzRig, raw: Any, state: Any
) -> None:
    execution_id = await _submit(rig, raw, state)
    if execution_id is None:
        assert await rig.hot_state.redis.dbsize() == 0
        return
    assert await rig.engine.store.delete_execution(execution_id) > 0
    assert await rig.hot_state.redis.dbsize() == 0, "creation wrote keys outside the execution's own"


async def test_fuzzing_tried_both_accepted_and_rejected_submissions(rig: FuzzRig) -> None:
    """Guards the generators: a fuzz run that only ever rejects proves nothing. Draws its own
    fixed sample from the same generators, so it holds whether or not the property ran first."""
    outcomes: Counter[str] = Counter()

    async def classify(example: tuple[Any, Any]) -> None:
        execution_id = await _submit(rig, *example)
        outcomes["rejected" if execution_id is None else "accepted"] += 1
        if execution_id is not None:
            await rig.engine.store.delete_execution(execution_id)

    await explore(st.tuples(RAW_PIPELINES, RUN_INPUTS), classify, sweep(GUARD_EXAMPLES))
    assert outcomes["accepted"] > 0 and outcomes["rejected"] > 0, outcomes


async def test_cyclic_graph_is_rejected_naming_the_cycle_and_stores_nothing(rig: FuzzRig) -> None:
    raw = {
        "name": "cycle",
        "steps": [
            {"name": "a", "stepKey": "test.noop", "dependsOn": ["c"]},
            {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
            {"name": "c", "stepKey": "test.noop", "dependsOn": ["b"]},
        ],
    }
    with pytest.raises(InvalidPipelineError) as caught:
        await rig.engine.create_execution(parse_pipeline(raw), {}, TENANT)
    assert caught.value.rule == "no_cycle" and "a -> c -> b -> a" in caught.value.message
    assert await rig.hot_state.redis.dbsize() == 0


async def test_run_input_above_the_limit_is_input_too_large_and_stores_nothing(rig: FuzzRig) -> None:
    pipeline = parse_pipeline({"name": "big", "steps": [{"name": "a", "stepKey": "test.noop"}]})
    with pytest.raises(InputTooLargeError) as caught:
        await rig.engine.create_execution(pipeline, {"blob": "x" * DEFAULT_MAX_INPUT_BYTES}, TENANT)
    assert f"the limit is {DEFAULT_MAX_INPUT_BYTES} bytes" in caught.value.message
    assert await rig.hot_state.redis.dbsize() == 0


def test_pipeline_document_above_the_limit_is_input_too_large() -> None:
    steps = [{"name": f"s{i}", "stepKey": "test.noop", "input": {"x": "y" * 1024}} for i in range(4200)]
    with pytest.raises(InputTooLargeError) as caught:
        parse_pipeline(json.dumps({"name": "huge", "steps": steps}))
    assert f"the limit is {MAX_PIPELINE_BYTES} bytes" in caught.value.message


def test_nan_in_a_pipeline_is_rejected_instead_of_silently_becoming_null() -> None:
    with pytest.raises(InvalidPipelineError) as caught:
        parse_pipeline('{"name": "nan", "steps": [{"name": "a", "stepKey": "test.noop", "order": NaN}]}')
    assert caught.value.rule == "json"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"data": "x" * 9 * 1024 * 1024}, "input_too_large"),
        ({"data": float("nan")}, "invalid_pipeline"),
        ({"data": {1, 2}}, "invalid_pipeline"),
    ],
    ids=["above-8mib", "nan", "set"],
)
async def test_step_result_too_large_or_not_json_fails_the_step_permanently_with_a_clear_error(
    rig: FuzzRig, result: Any, expected: str
) -> None:
    engine = DagEngine(rig.engine.store, default_executor_registry(), RetryEngine())
    engine.executors.register(EchoExecutor(result))
    pipeline = parse_pipeline({"name": "result", "steps": [{"name": "a", "stepKey": "test.echo"}]})
    execution_id = await engine.create_execution(pipeline, {}, TENANT)
    try:
        assert await engine.run(execution_id, workers=1) == "Failed"
        view = await engine.store.read_execution(execution_id)
        assert view is not None
        [step] = view.steps
        assert step.status == "Failed" and step.retry_count == 0 and step.result is None
        assert step.error["code"] == "permanent" and step.error["message"].startswith(f"[{expected}]")
    finally:
        await engine.store.delete_execution(execution_id)
