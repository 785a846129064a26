"""Issue 9.3 (MCP tool inputs): every tool answers a structured result or a coded tool error,
whatever its arguments, and a refused call leaves the run state in Redis exactly as it was.

Arguments are generated (hypothesis) from each tool's published JSON input schema
(tests/unit/mcp_tool_schemas.json) -- well-formed values of the right type, bounds and
pattern, real ids of the caller's runs -- and mixed with hostile ones: wrong types, missing
and unknown arguments (forged `tenant_id`, `context_key`, ...), huge strings, deep nesting,
unicode, negative and huge numbers, ids full of Redis glob / hash-tag / CRLF / Lua text, and
pipelines with cycles, dangling dependencies, bad bindings and forged tenant fields. One MCP
session (a real in-memory client on a real runtime) serves every example and must still
answer at the end. The runtime has no runtime instance, so nothing runs in the background
and "unchanged" is exact: every key under the prefix with its size.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from mcp import Client

from mcp_runtime import (
    MAX_REQUEST_BYTES,
    BearerPrincipal,
    BearerVerifier,
    ConfiguredTokenVerifier,
    HttpAuth,
    Principal,
    ServerConfig,
    ToolGuard,
    build_server,
    http_app,
)
from runtime_core.bootstrap import RuntimeServices
from runtime_core.hot_state import EmbeddedRedis, HotState
from runtime_core.pipeline import MAX_PIPELINE_BYTES, parse_pipeline, validate_pipeline
from tests.reliability.exploration import explore, sweep
from tests.reliability.mcp_rig import (
    AUTHORIZER,
    asgi_client,
    call,
    error_code,
    error_text,
    failed,
    held_session,
    ok,
    run_state,
    runtime_settings,
    server_for,
    tool_backend,
)

SCHEMAS: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "unit" / "mcp_tool_schemas.json").read_text(encoding="utf-8")
)
FUZZ_ADMIN = Principal(name="fuzz-admin", user_id="fuzzer", tenant_id="tenant-fuzz", roles=("admin",))
FUZZ_VIEWER = Principal(name="fuzz-viewer", user_id="peeker", tenant_id="tenant-fuzz", roles=("viewer",))
RAG_INPUT = {"candidateId": "c-1", "jobId": "j-1"}
EXAMPLES_PER_TOOL = 40
PER_TOOL = settings(
    max_examples=EXAMPLES_PER_TOOL,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
SUBMISSIONS = settings(PER_TOOL, max_examples=120)
SWEEP_PER_TOOL = 8
MIB = 1024 * 1024
HTTP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MAX_STEPS = 10_000  # the published step limit of a pipeline (runtime_core.pipeline validation)

# Values

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**18, max_value=10**60)
    | st.integers(max_value=-(10**18))
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    LEAVES,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=12,
)
INJECTIONS = st.sampled_from(
    [
        "*",
        "?",
        "[a-z]*",
        "{x}",
        "srun_*",
        "exec_{exec_1}",
        "lrun_?",
        "srun_\r\nFLUSHALL\r\n",
        "exec_x\r\n*3\r\n$3\r\nDEL\r\n",
        "redis.call('FLUSHALL')",
        "'; return redis.call('KEYS','*') --",
        "%s%s%n",
        "../../etc/passwd",
        "\x00",
        "srun_\u202e\u0000",
        "null",
        "[]",
        "{}",
        '{"$payloadRef": "pay_x", "sha256": "0", "size": 1}',
        "\ud800",
        "名前_αβγ_🚀",
    ]
)
HUGE_TEXT = st.sampled_from([201, 5_000, 300_000, MIB + 1]).map(lambda n: "x" * n)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth):
        value = {"a": value}
    return value


DEEP = st.integers(min_value=60, max_value=200).map(nested)
HOSTILE = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()
    | st.lists(JSON_VALUES, max_size=3)
    | st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3)
    | st.text(max_size=40)
    | INJECTIONS
    | HUGE_TEXT
    | DEEP
)
FORGED_TENANT_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "tenant_id": st.just("tenant-victim"),
        "tenantId": st.just("tenant-victim"),
        "metadata": st.just({"tenant": "tenant-victim", "context_key": "mcp:submit:1"}),
        "context_key": st.just("mcp:submit:1"),
        "snapshot": st.just({"tenant_id": "tenant-victim", "roles": ["admin"]}),
    },
)
JSON_OBJECTS = (
    st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5)
    | FORGED_TENANT_FIELDS
    | st.builds(lambda forged, values: {**values, **forged}, FORGED_TENANT_FIELDS, st.just(RAG_INPUT))
    | st.sampled_from([MIB - 64, MIB + 64]).map(lambda n: {"blob": "x" * n})
    | DEEP
)

# Pipelines

STEP_NAMES = st.sampled_from(["a", "b", "c", "d"]) | st.text(max_size=4)
BINDINGS = st.sampled_from(
    [
        "state.candidateId",
        "state.",
        "steps.a.result",
        "steps.b.result.data",
        "steps..result",
        "steps.a",
        "steps.zz.result",
    ]
)
STEP_CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "sourceSteps": st.lists(STEP_NAMES, max_size=3) | HOSTILE,
        "sourceStep": STEP_NAMES | HOSTILE,
        "tenant_id": st.just("tenant-victim"),
        "retry": st.just({"maxRetries": 1}) | HOSTILE,
    },
)
STEPS = st.fixed_dictionaries(
    {"name": STEP_NAMES, "stepKey": st.sampled_from(["test.noop", "rag.merge", "nope.unknown", ""])},
    optional={
        "dependsOn": st.lists(STEP_NAMES, max_size=3) | HOSTILE,
        "input": st.dictionaries(st.text(max_size=4), BINDINGS | JSON_VALUES, max_size=3) | HOSTILE,
        "config": STEP_CONFIGS | HOSTILE,
        "tenant_id": st.just("tenant-victim"),
    },
)
DEFINITIONS = st.fixed_dictionaries(
    {"name": st.sampled_from(["fuzz", ""]) | HOSTILE, "steps": st.lists(STEPS, max_size=6) | HOSTILE},
    optional={
        "version": st.sampled_from(["1", "2"]) | HOSTILE,
        "executionMode": st.sampled_from(["Dag", "Linear"]),
        "config": FORGED_TENANT_FIELDS | HOSTILE,
        "tenant_id": st.just("tenant-victim"),
    },
)


@st.composite
def dag_definitions(draw: st.DrawFn) -> dict[str, Any]:
    """Well-formed DAGs of test.noop steps (bindings to ancestors, forged tenant config); one in
    three gets a back edge that closes a cycle."""
    count = draw(st.integers(min_value=1, max_value=5))
    steps: list[dict[str, Any]] = []
    for index in range(count):
        earlier = [f"s{n}" for n in range(index)]
        deps = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2)) if earlier else []
        step: dict[str, Any] = {"name": f"s{index}", "stepKey": "test.noop", "dependsOn": deps}
        if deps:
            step["input"] = {"x": f"steps.{deps[0]}.result", "y": "state.candidateId"}
        step["config"] = draw(FORGED_TENANT_FIELDS)
        steps.append(step)
    if count > 1 and draw(st.integers(min_value=0, max_value=2)) == 0:
        steps[0]["dependsOn"] = [f"s{count - 1}"]
    return {"name": "fuzz-dag", "steps": steps, "config": draw(FORGED_TENANT_FIELDS)}


PIPELINE_DOCUMENTS = (
    dag_definitions() | DEFINITIONS | DEFINITIONS.map(lambda d: {"pipelines": [d]}) | JSON_OBJECTS
)

# Ids: filled by the rig with real ids of the caller's runs; unknown ids of every kind.

KNOWN_IDS: list[str] = []
IDS = (
    st.deferred(lambda: st.sampled_from(KNOWN_IDS))
    | st.builds(
        lambda prefix, suffix: prefix + suffix,
        st.sampled_from(["srun_", "lrun_", "exec_", "rt_", "", "pay_"]),
        st.text(alphabet="0123456789abcdef*?[]{}:-_", max_size=30),
    )
    | INJECTIONS
)
SPECIAL_ARGUMENTS: dict[str, SearchStrategy[Any]] = {
    "run_id": IDS,
    "execution_id": IDS,
    "runtime_instance_id": IDS,
    "waiting_key": st.sampled_from(["hire-approval", "approval"]) | st.text(min_size=1, max_size=30),
    "pipeline": st.sampled_from(["rag-final-test", "fan-out", "human-approval", "flaky-retry"])
    | st.text(max_size=30),
    "definition": PIPELINE_DOCUMENTS,
    "input": JSON_OBJECTS,
    "payload": JSON_OBJECTS,
    "max_count": st.integers(min_value=1, max_value=3),
}
PIPELINE_SOURCES = {"pipeline", "definition"}
EXTRA_ARGUMENTS = st.dictionaries(
    st.sampled_from(["tenant_id", "tenantId", "context_key", "snapshot", "user_id", "roles"])
    | st.text(max_size=8),
    JSON_VALUES,
    max_size=2,
)


def schema_values(name: str, schema: dict[str, Any]) -> SearchStrategy[Any]:
    """Values of the type, bounds and pattern the published schema declares."""
    if name in SPECIAL_ARGUMENTS:
        return SPECIAL_ARGUMENTS[name]
    if "anyOf" in schema:
        return st.one_of([schema_values(name, option) for option in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    match schema.get("type"):
        case "integer":
            return st.integers(min_value=schema.get("minimum"), max_value=schema.get("maximum"))
        case "boolean":
            return st.booleans()
        case "null":
            return st.none()
        case "object":
            return JSON_OBJECTS
        case _:
            return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 40))


def arguments_for(tool: str) -> SearchStrategy[dict[str, Any]]:
    """Two in three: schema-shaped arguments; otherwise anything goes, unknown names included."""
    properties: dict[str, dict[str, Any]] = SCHEMAS[tool]["input"]["properties"]
    loose = st.fixed_dictionaries(
        {}, optional={name: schema_values(name, prop) | HOSTILE for name, prop in properties.items()}
    )
    hostile = st.builds(lambda extra, arguments: {**extra, **arguments}, EXTRA_ARGUMENTS, loose)
    well_formed = schema_shaped(tool)
    return st.integers(min_value=0, max_value=2).flatmap(lambda n: hostile if n == 0 else well_formed)


def schema_shaped(tool: str) -> SearchStrategy[dict[str, Any]]:
    """Required arguments present, optional ones maybe; `pipeline` xor `definition` (the rule
    the schema cannot express) where a tool takes both."""
    schema = SCHEMAS[tool]["input"]
    properties: dict[str, dict[str, Any]] = schema["properties"]
    required = set(schema.get("required", ()))
    sources = PIPELINE_SOURCES & properties.keys()
    base = st.fixed_dictionaries(
        {name: schema_values(name, properties[name]) for name in required},
        optional={
            name: schema_values(name, prop)
            for name, prop in properties.items()
            if name not in required and name not in sources
        },
    )
    if not sources:
        return base
    source = st.one_of([st.fixed_dictionaries({name: SPECIAL_ARGUMENTS[name]}) for name in sorted(sources)])
    return st.builds(lambda arguments, chosen: {**arguments, **chosen}, base, source)


# Rig


@dataclass
class FuzzRig:
    services: RuntimeServices
    client: Client

    @property
    def hot_state(self) -> HotState:
        return self.services.hot_state


@pytest.fixture(scope="module")
async def rig(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[FuzzRig]:
    """No runtime instance: queued runs stay queued and nothing changes Redis behind a call."""
    settings_ = runtime_settings(
        redis_server.url, tmp_path_factory.mktemp("mcp-fuzz"), local_instances=0, scale_out_enabled=False
    )
    async with RuntimeServices(settings_) as services:
        async with held_session(server_for(tool_backend(services), FUZZ_ADMIN)) as client:
            await _seed_known_ids(services, client)
            yield FuzzRig(services, client)


async def _seed_known_ids(services: RuntimeServices, client: Client) -> None:
    """A queued shared run, a finished execution and a created (never run) execution."""
    queued = await ok(client, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT})
    snapshot = FUZZ_ADMIN.snapshot(context_key="fuzz-seed")
    pipeline = parse_pipeline({"name": "seed", "steps": [{"name": "a", "stepKey": "test.noop"}]})
    finished = await services.engine.create_execution(pipeline, {}, snapshot)
    await services.engine.run(finished, workers=1)
    pending = await services.engine.create_execution(pipeline, {}, snapshot)
    KNOWN_IDS.extend([queued["shared_run_id"], finished, pending])


async def answer_checked(rig: FuzzRig, tool: str, arguments: dict[str, Any]) -> str:
    """The property: a structured result, or a coded error that changed nothing in Redis.
    Returns `ok` or the error code."""
    before = await run_state(rig.hot_state)
    result = await call(rig.client, tool, arguments)
    if not result.is_error:
        assert result.structured_content is not None, f"{tool} answered without structured content"
        return "ok"
    code = error_code(result)
    text = error_text(result)
    assert code != "internal_error", f"{tool} failed unexpectedly for {arguments!r:.300}: {text}"
    assert "Traceback" not in text and 'File "' not in text
    assert await run_state(rig.hot_state) == before, f"refused {tool} ({code}) changed Redis"
    return code


# Properties


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
@PER_TOOL
@given(data=st.data())
async def test_every_tool_answers_a_result_or_a_coded_error_and_a_refusal_changes_nothing(
    rig: FuzzRig, tool: str, data: st.DataObject
) -> None:
    await answer_checked(rig, tool, data.draw(arguments_for(tool), label="arguments"))


@SUBMISSIONS
@given(arguments=arguments_for("submit"))
async def test_submit_of_any_pipeline_and_input_queues_a_run_or_refuses_and_queues_nothing(
    rig: FuzzRig, arguments: dict[str, Any]
) -> None:
    await answer_checked(rig, "submit", arguments)


@SUBMISSIONS
@given(arguments=arguments_for("pipelines.validate"))
async def test_validate_of_any_pipeline_answers_valid_or_the_broken_rule(
    rig: FuzzRig, arguments: dict[str, Any]
) -> None:
    await answer_checked(rig, "pipelines.validate", arguments)


# Limits and argument handling, one row each


async def test_submit_input_above_one_mib_is_input_too_large_and_queues_nothing(rig: FuzzRig) -> None:
    before = await run_state(rig.hot_state)
    text = await failed(rig.client, "submit", {"pipeline": "rag-final-test", "input": {"blob": "x" * MIB}})
    assert "[input_too_large]" in text and f"the limit is {MIB} bytes" in text
    assert await run_state(rig.hot_state) == before


async def test_definition_above_the_step_limit_is_input_too_large_for_submit_and_validate(
    rig: FuzzRig,
) -> None:
    steps = [{"name": f"s{i}", "stepKey": "test.noop"} for i in range(MAX_STEPS + 1)]
    definition = {"name": "too-many-steps", "steps": steps}
    before = await run_state(rig.hot_state)
    submitted = await failed(rig.client, "submit", {"definition": definition})
    validated = await failed(rig.client, "pipelines.validate", {"definition": definition})
    assert "[input_too_large]" in submitted and f"the limit is {MAX_STEPS}" in submitted
    assert "[input_too_large]" in validated
    assert await run_state(rig.hot_state) == before


async def test_definition_above_the_document_limit_is_input_too_large(rig: FuzzRig) -> None:
    definition = {
        "name": "huge",
        "steps": [{"name": "a", "stepKey": "test.noop"}],
        "description": "x" * MAX_PIPELINE_BYTES,
    }
    text = await failed(rig.client, "submit", {"definition": definition})
    assert "[input_too_large]" in text


async def test_human_input_above_the_limit_is_input_too_large(rig: FuzzRig) -> None:
    arguments = {"execution_id": KNOWN_IDS[-1], "waiting_key": "k", "payload": {"blob": "x" * MIB}}
    assert "[input_too_large]" in await failed(rig.client, "input.submit", arguments)


async def test_input_nested_deeper_than_the_limit_is_refused_and_queues_nothing(rig: FuzzRig) -> None:
    before = await run_state(rig.hot_state)
    text = await failed(rig.client, "submit", {"pipeline": "rag-final-test", "input": nested(100)})
    assert "nests deeper than" in text
    assert await run_state(rig.hot_state) == before


async def test_unknown_argument_such_as_a_forged_tenant_is_refused_not_ignored(rig: FuzzRig) -> None:
    arguments = {"pipeline": "rag-final-test", "input": RAG_INPUT, "tenant_id": "tenant-victim"}
    text = await failed(rig.client, "submit", arguments)
    assert "[invalid_arguments] tenant_id: Extra inputs are not permitted" in text


async def test_wrong_argument_type_is_invalid_arguments_naming_the_argument(rig: FuzzRig) -> None:
    text = await failed(rig.client, "run.status", {"run_id": 12})
    assert "[invalid_arguments] run_id: Input should be a valid string" in text


async def test_over_long_or_control_character_id_is_invalid_arguments_and_not_echoed(rig: FuzzRig) -> None:
    long_id = "srun_" + "0" * 10_000
    long_text = await failed(rig.client, "run.status", {"run_id": long_id})
    crlf_text = await failed(rig.client, "cancel", {"run_id": "srun_1\r\nDEL x"})
    assert "at most 200 characters" in long_text and long_id not in long_text
    assert "[invalid_arguments]" in crlf_text and "\r\n" not in crlf_text


async def test_argument_errors_of_a_denied_caller_are_reported_as_the_denial(rig: FuzzRig) -> None:
    async with held_session(server_for(tool_backend(rig.services), FUZZ_VIEWER)) as viewer:
        text = await failed(viewer, "submit", {"pipeline": 5, "tenant_id": "x"})
    assert "[permission_denied]" in text


async def test_http_request_body_above_the_cap_is_413_before_any_parsing(rig: FuzzRig) -> None:
    verifier = BearerVerifier(ConfiguredTokenVerifier(ServerConfig(principals={})))
    guard = ToolGuard(BearerPrincipal(), AUTHORIZER)
    server = build_server(tool_backend(rig.services), guard)
    oversized = b"[" + b" " * MAX_REQUEST_BYTES + b"]"

    async def streamed() -> AsyncIterator[bytes]:
        for start in range(0, len(oversized), MIB):
            yield oversized[start : start + MIB]

    async with asgi_client(http_app(server, host="127.0.0.1", auth=HttpAuth(verifier, AUTHORIZER))) as http:
        declared = await http.post("/mcp", content=oversized, headers=HTTP_HEADERS)
        chunked = await http.post("/mcp", content=streamed(), headers=HTTP_HEADERS)
        small = await http.post("/mcp", content=b"{}", headers=HTTP_HEADERS)
    assert (declared.status_code, chunked.status_code) == (413, 413)
    assert "request_too_large" in declared.text
    assert small.status_code == 401  # under the cap: on to authentication as usual


def test_validating_a_10000_step_chain_of_bindings_does_not_block_for_seconds() -> None:
    """Binding checks once walked every step's ancestors: 60 s of blocked event loop per submit
    (now about 0.2 s; the bound leaves room for a loaded CI machine)."""
    steps = [{"name": "s0", "stepKey": "test.noop"}] + [
        {
            "name": f"s{i}",
            "stepKey": "test.noop",
            "dependsOn": [f"s{i - 1}"],
            "input": {"x": f"steps.s{i - 1}.result"},
        }
        for i in range(1, MAX_STEPS)
    ]
    pipeline = parse_pipeline({"name": "chain", "steps": steps})
    started = time.perf_counter()
    validate_pipeline(pipeline, ["test.noop"])
    assert time.perf_counter() - started < 3.0


async def test_the_session_survived_every_example_and_both_outcomes_were_exercised(rig: FuzzRig) -> None:
    """Sweeps every tool itself (a fixed sample through the rig's one session, checked like the
    properties), then: the session still answers, and the generators reached results and
    several kinds of refusal. Holds whether or not the property tests ran first."""
    tally: Counter[str] = Counter()

    for tool in sorted(SCHEMAS):

        async def one(arguments: dict[str, Any], tool: str = tool) -> None:
            tally[f"{tool}:{await answer_checked(rig, tool, arguments)}"] += 1

        await explore(arguments_for(tool), one, sweep(SWEEP_PER_TOOL))
    assert (await ok(rig.client, "pipelines.list", {}))["pipelines"]
    outcomes = {key.split(":")[1] for key in tally}
    assert "ok" in outcomes and "invalid_arguments" in outcomes and len(outcomes) >= 5, tally
    assert sum(tally.values()) == len(SCHEMAS) * SWEEP_PER_TOOL
    print(f"\nMCP input fuzz sweep: {sum(tally.values())} calls -> {dict(sorted(tally.items()))}")
