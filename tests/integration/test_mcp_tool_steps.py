"""`mcp.tool` steps (issue 31.1) against the example MCP server started as a real process, over
streamable HTTP and over stdio (the runtime starts that one itself): arguments from bindings,
structuredContent as the result with the operation id the server received in `_meta`, isError
as typed failures, the submit-time checks for the submitting tenant (its own servers only,
another tenant's answering like an unknown one; the step's input against the tool's input
schema when the server answers), bearer tokens and OAuth client credentials read from the
environment (the loopback authorization server of the auth tests issues the token).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime_core.control import ExecutionControlService, attach_execution_control
from runtime_core.dag import DagEngine, DagStore, EngineSettings
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import HotState
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.steps import StepProviders, StepProviderSettings, default_executor_registry
from tests.integration.control_plane_support import TENANT_A, TENANT_B
from tests.loopback import closed_port
from tests.mcp_tool_server import Effects, http_entry, side_effects_server, stdio_entry
from tests.oauth_realm import Client as OAuthClient
from tests.oauth_server import OAuthServer

TOKEN_VARIABLE = "MCPTOOL_TEST_TICKETS_TOKEN"


@pytest.fixture(scope="module")
def effects_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-effects") / "effects.jsonl"


@pytest.fixture(scope="module")
async def server_url(effects_file: Path) -> AsyncIterator[str]:
    async with side_effects_server(effects_file) as url:
        yield url


@pytest.fixture
async def providers(server_url: str, effects_file: Path) -> AsyncIterator[StepProviders]:
    settings = StepProviderSettings.model_validate(
        {
            "mcp_servers": {
                "tenant-a": {
                    "tickets": http_entry(server_url, allowed_tools=["create_ticket", "reject", "lookup"]),
                    "local": stdio_entry(effects_file),
                    "offline": http_entry(f"http://127.0.0.1:{closed_port()}/mcp", connect_timeout_s=2),
                },
                "tenant-b": {"mail": http_entry(server_url, allowed_tools=["send_email"])},
            }
        }
    )
    built = StepProviders.build(settings)
    yield built
    await built.aclose()


def engine_with(hot_state: HotState, providers: StepProviders) -> tuple[DagEngine, ExecutionControlService]:
    registry = default_executor_registry(providers=providers)
    engine = DagEngine(DagStore(hot_state), registry, RetryEngine(), settings=EngineSettings(lease_ms=30_000))
    control = ExecutionControlService(hot_state)
    attach_execution_control(engine, control)
    return engine, control


def tool_pipeline(server: str, tool: str, step_input: dict[str, Any], **config: Any) -> PipelineDefinition:
    step = {"name": "call", "stepKey": "mcp.tool", "input": step_input}
    step["config"] = {"server": server, "tool": tool, **config}
    return parse_pipeline({"name": "mcp-tool", "steps": [step]})


async def run_step(engine: DagEngine, pipeline: PipelineDefinition, state: dict[str, Any]) -> Any:
    execution_id = await engine.create_execution(pipeline, state, TENANT_A)
    status = await engine.run(execution_id, workers=1)
    view = await engine.store.read_execution(execution_id)
    assert view is not None
    return status, view.steps[0]


async def test_a_tool_call_over_http_gets_its_arguments_from_bindings_and_its_result_from_structured_content(
    hot_state: HotState, providers: StepProviders, effects_file: Path
) -> None:
    engine, _ = engine_with(hot_state, providers)
    pipeline = tool_pipeline("tickets", "create_ticket", {"title": "state.title", "priority": 2})

    status, step = await run_step(engine, pipeline, {"title": "printer on fire"})

    assert status == "Completed"
    data, operation_id = step.result["data"], step.result["operationId"]
    assert data["title"] == "printer on fire" and data["priority"] == 2
    assert data["operation_id"] == operation_id  # what the server read from _meta
    assert Effects(effects_file).effects("create_ticket")[operation_id] == 1
    assert (step.result["server"], step.result["tool"]) == ("tickets", "create_ticket")


async def test_a_stdio_server_the_runtime_starts_itself_answers_a_tool_call(
    hot_state: HotState, providers: StepProviders
) -> None:
    engine, _ = engine_with(hot_state, providers)

    status, step = await run_step(
        engine, tool_pipeline("local", "lookup", {"city": "state.city"}), {"city": "Oslo"}
    )

    assert status == "Completed"
    assert step.result["data"] == {"city": "Oslo", "temp_c": 4.0}


@pytest.mark.parametrize(("retryable", "code"), [(False, "permanent"), (True, "transient")])
async def test_an_is_error_result_is_a_typed_failure(
    hot_state: HotState, providers: StepProviders, retryable: bool, code: str
) -> None:
    engine, _ = engine_with(hot_state, providers)
    pipeline = tool_pipeline("tickets", "reject", {"reason": "closed", "retryable": retryable})

    status, step = await run_step(engine, pipeline, {})

    assert status == "Failed"
    assert step.last_error is not None and step.last_error.code == code
    assert "answered isError: rejected: closed" in step.last_error.message


async def test_arguments_that_do_not_fit_the_input_schema_fail_before_any_call(
    hot_state: HotState, providers: StepProviders, effects_file: Path
) -> None:
    engine, _ = engine_with(hot_state, providers)
    before = len(Effects(effects_file).entries())

    status, step = await run_step(
        engine, tool_pipeline("tickets", "create_ticket", {"title": "state.title"}), {"title": ""}
    )

    assert status == "Failed" and step.last_error is not None
    assert (
        step.last_error.code == "permanent"
        and "do not fit its input schema: title" in step.last_error.message
    )
    assert len(Effects(effects_file).entries()) == before


async def test_submit_checks_the_input_against_the_tool_schema_of_a_reachable_server(
    hot_state: HotState, providers: StepProviders
) -> None:
    engine, _ = engine_with(hot_state, providers)
    await engine.check_for_tenant(tool_pipeline("tickets", "create_ticket", {"title": "state.t"}), TENANT_A)

    cases = {
        "missing required argument(s) title": {"priority": 1},
        "priority: 'high' is not of type 'integer'": {"title": "state.t", "priority": "high"},
    }
    for expected, step_input in cases.items():
        with pytest.raises(InvalidPipelineError) as refused:
            await engine.check_for_tenant(tool_pipeline("tickets", "create_ticket", step_input), TENANT_A)
        assert refused.value.rule == "tenant_step_check" and expected in refused.value.message
    with pytest.raises(InvalidPipelineError, match="offers no tool 'nope'"):
        await engine.check_for_tenant(tool_pipeline("local", "nope", {}), TENANT_A)
    with pytest.raises(InvalidPipelineError, match="is not in its allowed_tools"):
        await engine.check_for_tenant(tool_pipeline("tickets", "send_email", {}), TENANT_A)


async def test_submit_accepts_a_step_whose_server_does_not_answer_and_the_run_fails_transient(
    hot_state: HotState, providers: StepProviders
) -> None:
    engine, _ = engine_with(hot_state, providers)
    pipeline = tool_pipeline("offline", "create_ticket", {"priority": "not even checked"})

    await engine.check_for_tenant(pipeline, TENANT_A)
    status, step = await run_step(engine, pipeline, {})

    assert status == "Failed" and step.last_error is not None
    assert step.last_error.code == "transient" and "'offline' is unreachable" in step.last_error.message


async def test_another_tenants_server_answers_exactly_like_an_unknown_server(
    hot_state: HotState, providers: StepProviders
) -> None:
    engine, _ = engine_with(hot_state, providers)
    messages = []
    for server in ("tickets", "no-such-server"):
        with pytest.raises(InvalidPipelineError) as refused:
            await engine.check_for_tenant(tool_pipeline(server, "create_ticket", {"title": "x"}), TENANT_B)
        messages.append(refused.value.message.replace(server, "<server>"))
    assert messages[0] == messages[1]
    assert "configured: mail" in messages[0] and "tickets" not in messages[0]

    # A run that reaches an engine without the submit check (tenant B's snapshot) fails the same way.
    execution_id = await engine.create_execution(
        tool_pipeline("tickets", "lookup", {"city": "x"}), {}, TENANT_B
    )
    assert await engine.run(execution_id, workers=1) == "Failed"
    view = await engine.store.read_execution(execution_id)
    assert view is not None and view.steps[0].last_error is not None
    assert "no MCP server 'tickets' is configured for this run's tenant" in view.steps[0].last_error.message


async def test_a_bearer_token_read_from_the_environment_reaches_the_server(
    hot_state: HotState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_VARIABLE, "s3cret-token")
    effects = tmp_path / "effects.jsonl"
    async with side_effects_server(effects, "--bearer-token-env", TOKEN_VARIABLE) as url:
        settings = StepProviderSettings.model_validate(
            {
                "mcp_servers": {
                    "tenant-a": {
                        "with-token": http_entry(url, bearer_token_env=TOKEN_VARIABLE),
                        "without": http_entry(url),
                    }
                }
            }
        )
        providers = StepProviders.build(settings)
        try:
            engine, _ = engine_with(hot_state, providers)
            ok, _ = await run_step(engine, tool_pipeline("with-token", "lookup", {"city": "Rome"}), {})
            refused, step = await run_step(engine, tool_pipeline("without", "lookup", {"city": "Rome"}), {})
        finally:
            await providers.aclose()
    assert ok == "Completed" and refused == "Failed"
    assert step.last_error is not None and "s3cret-token" not in step.last_error.message


async def test_oauth_client_credentials_from_the_environment_get_a_token_the_server_accepts(
    hot_state: HotState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth = OAuthServer().start()
    realm = oauth.realm("tools")
    realm.clients["runtime"] = OAuthClient("runtime", secret="cs-right-1", scopes=("tickets",))
    monkeypatch.setenv("MCPTOOL_TEST_RIGHT_SECRET", "cs-right-1")
    monkeypatch.setenv("MCPTOOL_TEST_WRONG_SECRET", "cs-wrong-2")
    server_options = ("--oauth-issuer", realm.issuer, "--jwks-url", realm.endpoint("jwks"))

    def oauth_entry(url: str, variable: str) -> dict[str, Any]:
        credentials = {"client_id": "runtime", "client_secret_env": variable, "issuer": realm.issuer}
        return http_entry(url, oauth={**credentials, "scopes": ["tickets"]}, connect_timeout_s=5)

    try:
        async with side_effects_server(tmp_path / "effects.jsonl", *server_options) as url:
            servers = {
                "right": oauth_entry(url, "MCPTOOL_TEST_RIGHT_SECRET"),
                "wrong": oauth_entry(url, "MCPTOOL_TEST_WRONG_SECRET"),
            }
            providers = StepProviders.build(
                StepProviderSettings.model_validate({"mcp_servers": {"tenant-a": servers}})
            )
            try:
                engine, _ = engine_with(hot_state, providers)
                ok, _ = await run_step(engine, tool_pipeline("right", "lookup", {"city": "Rome"}), {})
                refused, step = await run_step(engine, tool_pipeline("wrong", "lookup", {"city": "Rome"}), {})
            finally:
                await providers.aclose()
    finally:
        oauth.stop()
    assert ok == "Completed" and refused == "Failed"
    assert step.last_error is not None and step.last_error.code == "transient"
    assert "cs-wrong-2" not in step.last_error.message and "cs-right-1" not in step.last_error.message
