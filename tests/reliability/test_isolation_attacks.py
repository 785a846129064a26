"""Issue 9.4: tenant isolation under attack, and bearer-token handling.

Tenant B -- an operator, and an admin of tenant B -- holds tenant A's SharedRunId, LocalRunId
and ExecutionId and tries each on every tool that takes an id; forges tenant fields in run
input, pipeline config and step config; replays a stolen ExecutionId; points step inputs at
A's externalized payload. Every answer is byte-for-byte the answer for an unknown id of the
same prefix, A's state is unchanged and A's run still completes, B's runs stay B's, and
nothing of A's ids or data shows up in B's answers, audit queries or the log records of
B's calls. Tokens: stored as sha256 digests, compared as digests in constant time, never
logged. Real runtime on the test redis-server, real in-memory MCP sessions, real ASGI app.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp import Client
from pydantic import ValidationError

from mcp_runtime import (
    BearerPrincipal,
    BearerVerifier,
    ConfiguredTokenVerifier,
    HttpAuth,
    Principal,
    PrincipalConfig,
    ServerConfig,
    ToolGuard,
    build_server,
    hash_token,
    http_app,
)
from runtime_core.bootstrap import RuntimeServices
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.retention import ResolverError, parse_hot_ref
from runtime_core.steps import StepInvocation
from tests.helpers import wait_until
from tests.reliability.mcp_rig import (
    AUTHORIZER,
    asgi_client,
    call,
    failed,
    held_session,
    ok,
    runtime_settings,
    server_for,
    tool_backend,
)

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
A_OPERATOR = Principal(name="a-operator", user_id="alice", tenant_id=TENANT_A, roles=("operator",))
B_OPERATOR = Principal(name="b-operator", user_id="bob", tenant_id=TENANT_B, roles=("operator",))
B_ADMIN = Principal(name="b-admin", user_id="bea", tenant_id=TENANT_B, roles=("admin",))
ATTACKERS = ("b-operator", "b-admin")
A_SECRET = "a-secret-" + secrets.token_hex(8)
A_INPUT_SECRET = "a-input-" + secrets.token_hex(8)
WAITING_KEY = "a-approval"
FORGED = {
    "tenant_id": TENANT_A,
    "tenantId": TENANT_A,
    "metadata": {"tenant": TENANT_A},
    "context_key": "mcp:x:1",
}


class SecretExecutor:
    """`test.secret`: a result above the externalization threshold, holding tenant A's secret."""

    step_key = "test.secret"

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        return {"data": {"secret": A_SECRET, "padding": "p" * 20_000}}


class EchoExecutor:
    """`test.echo`: returns its `value` input as its result (like a tool echoing a response)."""

    step_key = "test.echo"

    async def execute(self, invocation: StepInvocation) -> Any:
        return invocation.inputs.get("value")


@dataclass(frozen=True)
class RunIds:
    shared_run_id: str
    local_run_id: str
    execution_id: str

    def by_kind(self, kind: str) -> str:
        return str(getattr(self, kind))

    def all(self) -> tuple[str, str, str]:
        return (self.shared_run_id, self.local_run_id, self.execution_id)


@dataclass(frozen=True)
class World:
    services: RuntimeServices
    sessions: dict[str, Client]
    finished: RunIds  # tenant A's completed run, its result externalized as a payload
    waiting: RunIds  # tenant A's run parked on WAITING_KEY
    payload_ref: dict[str, Any]  # the hot reference to tenant A's payload, as stored in Redis

    @property
    def a(self) -> Client:
        return self.sessions["a-operator"]

    def a_markers(self) -> set[str]:
        return {
            A_SECRET,
            A_INPUT_SECRET,
            *self.finished.all(),
            *self.waiting.all(),
            self.payload_ref["$payloadRef"],
        }


# World


@pytest.fixture(scope="module")
async def world(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    settings = runtime_settings(
        redis_server.url,
        tmp_path_factory.mktemp("isolation"),
        workers_per_instance=8,
        max_local_workers_per_execution=2,
        max_concurrent_runs_per_instance=8,
    )
    async with RuntimeServices(settings) as services:
        services.executors.register(SecretExecutor())
        services.executors.register(EchoExecutor())
        backend = tool_backend(services)
        async with (
            held_session(server_for(backend, A_OPERATOR)) as a,
            held_session(server_for(backend, B_OPERATOR)) as b_operator,
            held_session(server_for(backend, B_ADMIN)) as b_admin,
        ):
            finished = await _finished_secret_run(a)
            waiting = await _run_waiting_for_input(a)
            execution = await services.dag_store.read_execution(finished.execution_id)
            assert execution is not None
            stored = execution.steps[0].result
            assert parse_hot_ref(stored) is not None, "tenant A's result was not externalized"
            sessions = {"a-operator": a, "b-operator": b_operator, "b-admin": b_admin}
            yield World(services, sessions, finished, waiting, stored)


async def submit_and_dispatch(client: Client, arguments: dict[str, Any]) -> str:
    run_id = (await ok(client, "submit", arguments))["shared_run_id"]

    async def dispatched() -> bool:
        await ok(client, "queue.drain", {"max_count": 20})
        return (await ok(client, "run.status", {"run_id": run_id}))["local_run_id"] is not None

    await wait_until(dispatched, timeout=20, interval=0.05)
    return run_id


async def status_when(
    client: Client, run_id: str, *, done: bool = True, control: str | None = None
) -> dict[str, Any]:
    async def reached() -> bool:
        status = await ok(client, "run.status", {"run_id": run_id})
        if control is None:
            return bool(status["done"])
        return status["control_status"] == control

    await wait_until(reached, timeout=20, interval=0.02)
    return await ok(client, "run.status", {"run_id": run_id})


def ids_of(status: dict[str, Any]) -> RunIds:
    return RunIds(status["shared_run_id"], status["local_run_id"], status["execution_id"])


async def _finished_secret_run(a: Client) -> RunIds:
    definition = {"name": "a-secret", "steps": [{"name": "secret", "stepKey": "test.secret"}]}
    run_id = await submit_and_dispatch(a, {"definition": definition, "input": {"note": A_INPUT_SECRET}})
    status = await status_when(a, run_id)
    assert status["execution_status"] == "Completed"
    return ids_of(status)


async def _run_waiting_for_input(a: Client) -> RunIds:
    step = {"name": "approval", "stepKey": "human.approval", "config": {"waitingKey": WAITING_KEY}}
    definition = {"name": "a-approval", "steps": [step]}
    run_id = await submit_and_dispatch(a, {"definition": definition, "input": {"note": A_INPUT_SECRET}})
    return ids_of(await status_when(a, run_id, control="WaitingForInput"))


async def tenant_a_state(world: World) -> list[Any]:
    """What B must not change: A's view of both runs and the waiting run's control state."""
    views = [
        await ok(world.a, "run.status", {"run_id": ids.shared_run_id})
        for ids in (world.finished, world.waiting)
    ]
    control = await world.services.control.get(world.waiting.execution_id, A_OPERATOR.snapshot("check"))
    return [*views, control.model_dump()]


def unknown_like(foreign_id: str) -> str:
    """An id nobody has, with the same prefix and length as `foreign_id`."""
    prefix = foreign_id[: foreign_id.index("_") + 1]
    return prefix + secrets.token_hex(len(foreign_id))[: len(foreign_id) - len(prefix)]


def assert_clean(text: str, world: World, *, allowed: str = "") -> None:
    """Nothing of tenant A: neither its data nor any of its ids (but the one B itself sent)."""
    leaked = {marker for marker in world.a_markers() if marker != allowed and marker in text}
    assert not leaked, f"tenant A leaked {leaked} into: {text[:400]}"


# Every tool that takes an id, with each of A's ids


ID_TOOLS = [
    ("run.status", "run_id", {}),
    ("cancel", "run_id", {}),
    ("ledger", "run_id", {}),
    ("trace", "run_id", {}),
    ("pause", "execution_id", {}),
    ("resume", "execution_id", {}),
    ("replay", "execution_id", {}),
    ("input.submit", "execution_id", {"waiting_key": WAITING_KEY, "payload": {"approved": True}}),
]


@pytest.mark.parametrize("attacker", ATTACKERS)
@pytest.mark.parametrize("target", ["finished", "waiting"])
@pytest.mark.parametrize("kind", ["shared_run_id", "local_run_id", "execution_id"])
@pytest.mark.parametrize(("tool", "field", "extra"), ID_TOOLS, ids=[row[0] for row in ID_TOOLS])
async def test_foreign_id_answers_byte_for_byte_like_an_unknown_id_and_changes_nothing(
    world: World, attacker: str, target: str, kind: str, tool: str, field: str, extra: dict[str, Any]
) -> None:
    foreign_id = getattr(world, target).by_kind(kind)
    unknown_id = unknown_like(foreign_id)
    client = world.sessions[attacker]
    before = await tenant_a_state(world)
    foreign = await failed(client, tool, {field: foreign_id, **extra})
    unknown = await failed(client, tool, {field: unknown_id, **extra})
    assert foreign.replace(foreign_id, "<id>") == unknown.replace(unknown_id, "<id>")
    assert "[not_found]" in foreign
    assert_clean(foreign, world, allowed=foreign_id)
    assert await tenant_a_state(world) == before


@pytest.mark.parametrize("attacker", ATTACKERS)
async def test_forensics_filtered_by_a_foreign_id_lists_nothing_like_an_unknown_id(
    world: World, attacker: str
) -> None:
    lost_instance = "rt_" + secrets.token_hex(6)
    await world.services.audit.forensics.record(
        A_OPERATOR.snapshot("recovery"),
        runtime_instance_id=lost_instance,
        kind="in_flight_execution",
        action="requeued_same_execution_id",
        execution_id=world.finished.execution_id,
        detail={"secret": A_SECRET},
    )
    client = world.sessions[attacker]
    by_execution = await ok(client, "forensics", {"execution_id": world.finished.execution_id})
    by_instance = await ok(client, "forensics", {"runtime_instance_id": lost_instance})
    everything = await ok(client, "forensics", {})
    mine = await ok(world.a, "forensics", {"runtime_instance_id": lost_instance})
    assert by_execution == by_instance == {"records": []}
    assert_clean(json.dumps(everything), world)
    assert len(mine["records"]) >= 1


# Forged tenant fields


async def test_forged_tenant_fields_in_input_definition_and_step_config_leave_the_run_in_the_callers_tenant(
    world: World,
) -> None:
    step = {
        "name": "echo",
        "stepKey": "test.echo",
        "input": {"value": "state.tenant_id"},
        "config": dict(FORGED),
    }
    definition = {"name": "forged", "config": dict(FORGED), "steps": [step]}
    b = world.sessions["b-operator"]
    run_id = await submit_and_dispatch(b, {"definition": definition, "input": dict(FORGED)})
    status = await status_when(b, run_id)
    durable = world.services.durable_store
    b_ledger = await durable.list_ledger(TENANT_B, None, run_id, 1000)
    a_ledger = await durable.list_ledger(TENANT_A, None, run_id, 1000)
    meta = await world.services.dag_store.load_meta(status["execution_id"])
    assert (status["tenant_id"], status["execution_status"]) == (TENANT_B, "Completed")
    assert meta is not None and meta.snapshot is not None and meta.snapshot.tenant_id == TENANT_B
    assert b_ledger and {entry.tenant_id for entry in b_ledger} == {TENANT_B} and not a_ledger
    assert await durable.list_spans(TENANT_A, status["execution_id"]) == []
    assert await durable.list_spans(TENANT_B, status["execution_id"])
    assert "[not_found]" in await failed(world.a, "run.status", {"run_id": run_id})
    assert "[not_found]" in await failed(world.a, "ledger", {"run_id": run_id})


async def test_forged_tenant_argument_is_refused_and_queues_nothing(world: World) -> None:
    b = world.sessions["b-admin"]
    arguments = {
        "pipeline": "rag-final-test",
        "input": {"candidateId": "c", "jobId": "j"},
        "tenant_id": TENANT_A,
    }
    text = await failed(b, "submit", arguments)
    drained = await ok(world.a, "queue.drain", {"max_count": 5})
    assert "[invalid_arguments] tenant_id: Extra inputs are not permitted" in text
    assert drained["runs"] == []


# Stolen ExecutionId


@pytest.mark.parametrize("attacker", ATTACKERS)
async def test_replay_with_a_stolen_execution_id_is_not_found_even_once_its_live_state_is_gone(
    world: World, attacker: str
) -> None:
    stolen = world.finished.execution_id
    unknown = unknown_like(stolen)
    client = world.sessions[attacker]
    await world.services.dag_store.delete_execution(stolen)
    try:
        foreign = await failed(client, "replay", {"execution_id": stolen})
        expected = await failed(client, "replay", {"execution_id": unknown})
    finally:
        restored = await ok(world.a, "replay", {"execution_id": stolen})
    assert foreign.replace(stolen, "<id>") == expected.replace(unknown, "<id>")
    assert (restored["restored"], restored["status"]) == (True, "Completed")


# Payloads by reference


@pytest.mark.parametrize(
    ("via", "forged"),
    [("step input", "reference"), ("run input", "reference"), ("step input", "bare id")],
)
async def test_a_forged_reference_to_a_foreign_payload_reads_back_as_plain_data_of_the_caller(
    world: World, via: str, forged: str
) -> None:
    reference = (
        world.payload_ref if forged == "reference" else {"$payloadRef": world.payload_ref["$payloadRef"]}
    )
    steps = [
        {
            "name": "echo",
            "stepKey": "test.echo",
            "input": {"value": reference if via == "step input" else "state.doc"},
        },
        {
            "name": "reader",
            "stepKey": "test.echo",
            "dependsOn": ["echo"],
            "input": {"value": "steps.echo.result"},
        },
    ]
    b = world.sessions["b-operator"]
    run_id = await submit_and_dispatch(
        b, {"definition": {"name": "by-ref", "steps": steps}, "input": {"doc": reference}}
    )
    status = await status_when(b, run_id)
    ledger = await ok(b, "ledger", {"run_id": run_id})
    trace = await ok(b, "trace", {"run_id": run_id})
    assert (status["execution_status"], status["result"]) == ("Completed", reference)
    for answer in (status, ledger, trace):
        assert_clean(json.dumps(answer), world, allowed=world.payload_ref["$payloadRef"])


async def test_the_resolver_refuses_a_payload_reference_of_another_tenant(world: World) -> None:
    resolver = world.services.engine.results.resolver  # type: ignore[attr-defined]
    execution_id, ref = world.finished.execution_id, world.payload_ref
    with pytest.raises(ResolverError) as refused:
        await resolver.resolve_stored(execution_id, "secret", ref, TENANT_B)
    owned = await resolver.resolve_stored(execution_id, "secret", ref, TENANT_A)
    assert refused.value.reason == "missing" and A_SECRET not in refused.value.message
    assert await world.services.durable_store.get_payload(ref["$payloadRef"], TENANT_B) is None
    assert owned["data"]["secret"] == A_SECRET


# Drain, logs


async def test_drain_by_tenant_b_reports_nothing_of_tenant_a_and_the_run_it_dispatched_stays_a_run_of_a(
    world: World,
) -> None:
    definition = {"name": "a-queued", "steps": [{"name": "s", "stepKey": "test.secret"}]}
    a_run = (await ok(world.a, "submit", {"definition": definition}))["shared_run_id"]
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    drained = await world.sessions["b-operator"].call_tool(
        "queue.drain", {"max_count": 50}, progress_callback=on_progress
    )
    seen_by_b = json.dumps(drained.structured_content) + " ".join(messages)
    a_status = await status_when(world.a, a_run)
    assert not drained.is_error and a_run not in seen_by_b
    assert_clean(seen_by_b, world)
    assert (a_status["tenant_id"], a_status["execution_status"]) == (TENANT_A, "Completed")


async def test_tenant_a_records_of_a_run_dispatched_by_tenant_b_name_nobody_of_tenant_b(world: World) -> None:
    """Issue 13.11: B's drain dispatches A's queued run; A's run.status and ledger record the
    pump (`drain` on this control plane), never B's user. B's own run keeps its drainer."""
    definition = {"name": "drained-by-b", "steps": [{"name": "s", "stepKey": "test.echo"}]}
    a_run = (await ok(world.a, "submit", {"definition": definition}))["shared_run_id"]
    b_run = (await ok(world.sessions["b-operator"], "submit", {"definition": definition}))["shared_run_id"]
    await ok(world.sessions["b-operator"], "queue.drain", {"max_count": 50})
    a_status = await status_when(world.a, a_run)
    await world.services.audit.flush()
    a_ledger = await ok(world.a, "ledger", {"run_id": a_run})
    b_ledger = await ok(world.sessions["b-operator"], "ledger", {"run_id": b_run})
    seen_by_a = json.dumps(a_status) + json.dumps(a_ledger)
    assert a_status["pump_worker_id"] == "drain" and a_status["execution_status"] == "Completed"
    assert not {B_OPERATOR.user_id, B_ADMIN.user_id, TENANT_B} & set(_words(seen_by_a)), seen_by_a[:400]
    [b_dispatched] = [e for e in b_ledger["entries"] if e["event"] == "shared_run.dispatched"]
    assert b_dispatched["attributes"]["pump.requested_by"] == B_OPERATOR.user_id


def _words(text: str) -> list[str]:
    return re.findall(r"[\w.-]+", text)


@contextmanager
def captured_records(caplog: pytest.LogCaptureFixture) -> Iterator[list[logging.LogRecord]]:
    """Every log record (any logger, DEBUG and up) emitted inside the block."""
    records: list[logging.LogRecord] = []
    with caplog.at_level(logging.DEBUG):
        start = len(caplog.records)
        yield records
        records.extend(caplog.records[start:])


def rendered(record: logging.LogRecord) -> str:
    return " ".join([record.getMessage(), repr(record.args), record.exc_text or "", repr(record.__dict__)])


@pytest.mark.parametrize(("tool", "field", "extra"), ID_TOOLS, ids=[row[0] for row in ID_TOOLS])
async def test_log_records_of_tenant_b_calls_carry_nothing_of_tenant_a_but_the_id_b_sent(
    world: World, caplog: pytest.LogCaptureFixture, tool: str, field: str, extra: dict[str, Any]
) -> None:
    """Tenant A is idle here (runs finished or parked, audit buffers flushed), so every record
    in the window of a B call comes from handling that call."""
    await world.services.audit.flush()
    client = world.sessions["b-admin"]
    for foreign_id in (*world.finished.all(), *world.waiting.all()):
        with captured_records(caplog) as records:
            await call(client, tool, {field: foreign_id, **extra})
        for record in records:
            assert_clean(rendered(record), world, allowed=foreign_id)


# Tokens


TOKENS = {"alice": "tok-a-" + secrets.token_urlsafe(24), "bob": "tok-b-" + secrets.token_urlsafe(24)}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def token_config() -> ServerConfig:
    return ServerConfig(
        principals={
            "alice": PrincipalConfig(
                user_id="alice",
                tenant_id=TENANT_A,
                roles=("operator",),
                token_sha256=(hash_token(TOKENS["alice"]),),
            ),
            "bob": PrincipalConfig(
                user_id="bob",
                tenant_id=TENANT_B,
                roles=("operator",),
                token_sha256=(hash_token(TOKENS["bob"]),),
            ),
        }
    )


def rpc(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


INITIALIZE = rpc(
    1,
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
)


@pytest.fixture
async def http(world: World) -> AsyncIterator[httpx.AsyncClient]:
    """The streamable HTTP app (bearer auth, X-API-Key shim) driven in-process through ASGI."""
    verifier = BearerVerifier(ConfiguredTokenVerifier(token_config()))
    guard = ToolGuard(BearerPrincipal(), AUTHORIZER)
    server = build_server(tool_backend(world.services), guard)
    async with asgi_client(http_app(server, host="127.0.0.1", auth=HttpAuth(verifier, AUTHORIZER))) as client:
        yield client


def wrong_token_of_equal_length(token: str) -> str:
    return token[:-1] + ("x" if token[-1] != "x" else "y")


@pytest.mark.parametrize(
    "presented",
    [
        wrong_token_of_equal_length(TOKENS["bob"]),
        TOKENS["bob"] + "x",
        TOKENS["bob"][:8],
        hash_token(TOKENS["bob"]),
        "",
    ],
    ids=["equal-length", "longer", "prefix", "its-digest", "empty"],
)
async def test_a_wrong_token_of_any_length_or_the_stored_digest_is_401(
    http: httpx.AsyncClient, presented: str
) -> None:
    bearer = await http.post(
        "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {presented}"}
    )
    api_key = await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "X-API-Key": presented})
    assert (bearer.status_code, api_key.status_code) == (401, 401)


async def test_no_log_record_carries_a_token_through_accepted_refused_and_tool_calls(
    world: World, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    bob, alice = TOKENS["bob"], TOKENS["alice"]
    with captured_records(caplog) as records:
        opened = await http.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {bob}"}
        )
        session = {
            "mcp-session-id": opened.headers.get("mcp-session-id", ""),
            "mcp-protocol-version": "2025-06-18",
        }
        called = await http.post(
            "/mcp",
            json=rpc(
                2, "tools/call", {"name": "run.status", "arguments": {"run_id": world.finished.shared_run_id}}
            ),
            headers={**MCP_HEADERS, **session, "X-API-Key": bob},
        )
        refused = await http.post(
            "/mcp",
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {wrong_token_of_equal_length(alice)}"},
        )
    assert (opened.status_code, called.status_code, refused.status_code) == (200, 200, 401)
    assert "[not_found]" in called.text and A_SECRET not in called.text
    assert records, "nothing was logged: the check would prove nothing"
    for record in records:
        text = rendered(record)
        assert bob not in text and alice not in text and wrong_token_of_equal_length(alice) not in text


async def test_a_crafted_json_rpc_request_id_shapes_only_the_context_key_never_the_tenant(
    world: World, http: httpx.AsyncClient
) -> None:
    bob = {"Authorization": f"Bearer {TOKENS['bob']}"}
    opened = await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **bob})
    session = {
        "mcp-session-id": opened.headers.get("mcp-session-id", ""),
        "mcp-protocol-version": "2025-06-18",
    }
    crafted = f"1:{TENANT_A}:{world.finished.execution_id}"
    submit = {"name": "submit", "arguments": {"pipeline": "rag-final-test", "input": dict(FORGED)}}
    answer = await http.post(
        "/mcp",
        json={**rpc(2, "tools/call", submit), "id": crafted},
        headers={**MCP_HEADERS, **session, **bob},
    )
    shared_run_id = json.loads(answer.text.split("data: ", 1)[1])["result"]["structuredContent"][
        "shared_run_id"
    ]
    record = await world.services.control_plane.parts.runs.get(shared_run_id)
    assert record is not None and record.snapshot is not None
    assert (record.tenant_id, record.snapshot.tenant_id) == (TENANT_B, TENANT_B)
    assert record.snapshot.context_key == f"mcp:submit:{crafted}"
    await ok(world.sessions["b-operator"], "cancel", {"run_id": shared_run_id})


async def test_verified_access_token_holds_the_digest_and_lookup_uses_constant_time_compare() -> None:
    verifier = BearerVerifier(ConfiguredTokenVerifier(token_config()))
    access = await verifier.verify_token(TOKENS["alice"])
    assert access is not None and access.client_id == "alice"
    assert access.token == hash_token(TOKENS["alice"]) and TOKENS["alice"] not in access.model_dump_json()
    assert "hmac.compare_digest(" in inspect.getsource(ConfiguredTokenVerifier.principal_name_for)


@pytest.mark.parametrize(
    "stored", ["tok-a-plaintext", TOKENS["alice"], hash_token("x").upper(), "sha256:" + hash_token("x")]
)
def test_configuration_refuses_anything_but_a_sha256_hex_digest_at_rest(stored: str) -> None:
    with pytest.raises(ValidationError, match="hash-token"):
        PrincipalConfig(user_id="u", tenant_id=TENANT_A, token_sha256=(stored,))


# Runs last: everything above left tenant A's waiting run able to finish


async def test_tenant_a_waiting_run_still_completes_with_its_own_input_after_every_attack(
    world: World,
) -> None:
    answered = await ok(
        world.a,
        "input.submit",
        {
            "execution_id": world.waiting.execution_id,
            "waiting_key": WAITING_KEY,
            "payload": {"approved": True},
        },
    )
    status = await status_when(world.a, world.waiting.shared_run_id)
    assert answered["execution_id"] == world.waiting.execution_id
    assert (status["tenant_id"], status["execution_status"]) == (TENANT_A, "Completed")
    assert status["result"]["data"]["approved"] is True
