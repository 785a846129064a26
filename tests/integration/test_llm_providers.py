"""`ai.prompt` against real LLM providers: a loopback server speaking the OpenAI Chat Completions and
Anthropic Messages wire formats (429 with Retry-After, 5xx, slow replies, replies that break the
schema), through the executor alone and through the engine with real Redis and the durable store."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from runtime_core.bootstrap import EngineServices, RuntimeSettings
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import EmbeddedRedis, HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import HostTransport, LocalRunStatus
from runtime_core.pipeline import parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.queueing import SubmitMode
from runtime_core.steps import (
    AiPromptExecutor,
    ExecutorRegistry,
    StepFailure,
    StepInvocation,
    StepProviders,
    StepProviderSettings,
    default_executor_registry,
)
from tests.integration.control_plane_support import DEFAULT_TENANT
from tests.integration.remote_support import hosted_control_plane, start_shared_host, wait_local_status
from tests.loopback import serving

API_KEY = f"sk-test-{secrets.token_hex(16)}"
KEY_ENV = "MCPRT_TEST_LLM_API_KEY"
OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
SCORE_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}
TENANT = "tenant-llm"
SNAPSHOT = ExecutionContextSnapshot(user_id="u-llm", tenant_id=TENANT, context_key="llm-tests")


# The loopback LLM server


@dataclass
class Reply:
    """One scripted answer: `body` None means a well-formed reply carrying `text`."""

    status: int = 200
    text: str = "a fine answer"
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    input_tokens: int = 11
    output_tokens: int = 7


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at_ms: float


class LoopbackLlm:
    """Answers each request with the next scripted Reply for its path (a valid one when none is left)."""

    def __init__(self) -> None:
        self.script: dict[str, list[Reply]] = defaultdict(list)
        self.seen: list[Seen] = []
        self.released = asyncio.Event()
        self.app = Starlette(
            routes=[Route(path, self._answer, methods=["POST"]) for path in (OPENAI_PATH, ANTHROPIC_PATH)]
        )

    def reset(self) -> None:
        self.script.clear()
        self.seen.clear()

    def then(self, path: str, *replies: Reply) -> None:
        self.script[path].extend(replies)

    async def _answer(self, request: Request) -> Response:
        body = await request.json()
        path = request.url.path
        self.seen.append(Seen(path, dict(request.headers), body, time.time() * 1000))
        reply = self.script[path].pop(0) if self.script[path] else Reply()
        if reply.delay_s:
            with contextlib.suppress(TimeoutError):  # a slow provider; the fixture releases it at the end
                await asyncio.wait_for(self.released.wait(), reply.delay_s)
        if reply.body == "":  # an empty body, as some gateways answer 401 / 403
            return Response(status_code=reply.status, headers=reply.headers)
        if reply.body is not None or reply.status != 200:
            return JSONResponse(reply.body or {}, status_code=reply.status, headers=reply.headers)
        wire = _openai_reply if path == OPENAI_PATH else _anthropic_reply
        return JSONResponse(wire(body["model"], reply), headers=reply.headers)


def _openai_reply(model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _anthropic_reply(model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply.text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


@pytest.fixture(scope="module")
async def loopback() -> AsyncIterator[tuple[LoopbackLlm, str]]:
    server = LoopbackLlm()
    async with serving(server.app) as base_url:
        yield server, base_url
        server.released.set()


@pytest.fixture
def llm(loopback: tuple[LoopbackLlm, str], monkeypatch: pytest.MonkeyPatch) -> LoopbackLlm:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    loopback[0].reset()
    return loopback[0]


def provider_settings(base_url: str) -> dict[str, Any]:
    common = {"api_key_env": KEY_ENV, "connect_timeout_s": 2, "read_timeout_s": 5}
    return {
        "llm": {
            "gpt": {"kind": "openai", "base_url": f"{base_url}/v1", "model": "gpt-loopback", **common},
            "claude": {"kind": "anthropic", "base_url": base_url, "model": "claude-loopback", **common},
            "gpt-impatient": {
                "kind": "openai",
                "base_url": f"{base_url}/v1",
                "model": "gpt-loopback",
                "api_key_env": KEY_ENV,
                "read_timeout_s": 0.3,
            },
            "claude-keyless": {
                "kind": "anthropic",
                "base_url": base_url,
                "model": "claude-loopback",
                "api_key_env": "MCPRT_TEST_UNSET_KEY",
            },
            # base_url with or without the version segment, and a local server taking no key
            "gpt-bare-origin": {"kind": "openai", "base_url": base_url, "model": "gpt-loopback", **common},
            "claude-versioned": {
                "kind": "anthropic",
                "base_url": f"{base_url}/v1/",
                "model": "claude-loopback",
                **common,
            },
            "claude-local": {"kind": "anthropic", "base_url": base_url, "model": "claude-loopback"},
        }
    }


@pytest.fixture(scope="module")
async def registry(loopback: tuple[LoopbackLlm, str]) -> AsyncIterator[ExecutorRegistry]:
    providers = StepProviders.build(StepProviderSettings.model_validate(provider_settings(loopback[1])))
    yield default_executor_registry(providers=providers)
    await providers.aclose()


def prompt(provider: str, **config: Any) -> StepInvocation:
    return StepInvocation(
        execution_id="exec_llm",
        pipeline_name="llm",
        pipeline_version="1",
        step_name="ask",
        step_key="ai.prompt",
        config={"template": "Rate {candidate.name}", "provider": provider, **config},
        inputs={"candidate": {"data": {"name": "Ada"}}},
        state={},
        attempt=0,
    )


async def run_step(registry: ExecutorRegistry, step: StepInvocation) -> Any:
    executor = registry.get("ai.prompt")
    assert executor is not None
    return await executor.execute(step)


async def failure_of(registry: ExecutorRegistry, step: StepInvocation) -> StepFailure:
    with pytest.raises(StepFailure) as failure:
        await run_step(registry, step)
    return failure.value


# The wire formats


async def test_openai_provider_sends_chat_completions_with_bearer_key_and_json_schema(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    llm.then(OPENAI_PATH, Reply(text='{"score": 4, "reason": "strong"}'))
    result = await run_step(
        registry, prompt("gpt", system="Be brief.", params={"temperature": 0}, responseSchema=SCORE_SCHEMA)
    )
    (seen,) = llm.seen
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.body["model"] == "gpt-loopback"
    assert seen.body["temperature"] == 0
    assert seen.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Rate Ada"},
    ]
    assert seen.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCORE_SCHEMA, "strict": True},
    }
    assert result["data"]["output"] == {"score": 4, "reason": "strong"}
    assert result["usage"] == {
        "provider": "gpt",
        "model": "gpt-loopback",
        "inputTokens": 11,
        "outputTokens": 7,
        "totalTokens": 18,
    }


async def test_anthropic_provider_sends_messages_with_api_key_version_and_output_format(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    llm.then(ANTHROPIC_PATH, Reply(text='{"score": 2, "reason": "junior"}', input_tokens=30, output_tokens=5))
    result = await run_step(registry, prompt("claude", model="claude-other", responseSchema=SCORE_SCHEMA))
    (seen,) = llm.seen
    assert seen.headers["x-api-key"] == API_KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    assert seen.body["model"] == "claude-other"
    assert seen.body["max_tokens"] == 1024
    assert seen.body["messages"] == [{"role": "user", "content": "Rate Ada"}]
    assert seen.body["output_config"] == {"format": {"type": "json_schema", "schema": SCORE_SCHEMA}}
    assert result["data"] == {
        "output": {"reason": "junior", "score": 2},
        "prompt": "Rate Ada",
        "text": '{"score": 2, "reason": "junior"}',
    }
    assert (result["usage"]["inputTokens"], result["usage"]["outputTokens"]) == (30, 5)


# Failures the retry engine understands


@pytest.mark.parametrize(("provider", "path"), [("gpt", OPENAI_PATH), ("claude", ANTHROPIC_PATH)])
async def test_429_is_transient_with_its_retry_after_as_the_earliest_retry(
    llm: LoopbackLlm, registry: ExecutorRegistry, provider: str, path: str
) -> None:
    llm.then(path, Reply(status=429, body={"error": "slow down"}, headers={"Retry-After": "2"}))
    failure = await failure_of(registry, prompt(provider))
    assert (failure.code, failure.retry_after_ms) == ("transient", 2000)
    decision = RetryEngine().decide(
        {"retry": {"maxRetries": 1, "baseDelayMs": 10}},
        failure.code,
        0,
        "s",
        retry_after_ms=failure.retry_after_ms,
    )
    assert (decision.retry, decision.delay_ms) == (True, 2000)


async def test_503_with_an_http_date_retry_after_waits_until_that_date(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    retry_at = email.utils.formatdate(time.time() + 3, usegmt=True)
    llm.then(OPENAI_PATH, Reply(status=503, body={"error": "busy"}, headers={"Retry-After": retry_at}))
    failure = await failure_of(registry, prompt("gpt"))
    assert failure.code == "transient"
    assert failure.retry_after_ms is not None and 1000 < failure.retry_after_ms <= 3000


async def test_500_is_transient_without_a_retry_floor(llm: LoopbackLlm, registry: ExecutorRegistry) -> None:
    llm.then(ANTHROPIC_PATH, Reply(status=500, body={"type": "error"}))
    failure = await failure_of(registry, prompt("claude"))
    assert (failure.code, failure.retry_after_ms) == ("transient", None)


async def test_a_refused_key_is_unauthenticated_and_the_echoed_key_is_redacted(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_request_error"}}
    llm.then(OPENAI_PATH, Reply(status=401, body=echo))
    failure = await failure_of(registry, prompt("gpt"))
    assert failure.code == "unauthenticated"
    assert "401" in failure.message and "[redacted]" in failure.message
    assert API_KEY not in failure.message
    assert RetryEngine().decide({"retry": {"maxRetries": 3}}, failure.code, 0, "s").retry is False


async def test_other_4xx_is_permanent(llm: LoopbackLlm, registry: ExecutorRegistry) -> None:
    llm.then(OPENAI_PATH, Reply(status=400, body={"error": {"message": "bad request"}}))
    failure = await failure_of(registry, prompt("gpt"))
    assert failure.code == "permanent" and "400" in failure.message


@pytest.mark.parametrize(("provider", "path"), [("gpt", OPENAI_PATH), ("claude", ANTHROPIC_PATH)])
@pytest.mark.parametrize(
    ("status", "code", "words"),
    [(401, "unauthenticated", "authentication failed"), (403, "permission_denied", "authorization failed")],
)
async def test_401_and_403_say_which_entry_and_key_variable_were_refused_even_with_an_empty_body(
    llm: LoopbackLlm, registry: ExecutorRegistry, provider: str, path: str, status: int, code: str, words: str
) -> None:
    llm.then(path, Reply(status=status, body=""))
    failure = await failure_of(registry, prompt(provider))
    assert failure.code == code
    assert words in failure.message
    assert f"the API key in {KEY_ENV} (api_key_env of llm entry '{provider}')" in failure.message
    assert "It said" not in failure.message  # nothing to quote
    assert API_KEY not in failure.message


async def test_a_401_of_an_entry_without_api_key_env_says_no_key_was_sent(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    llm.then(ANTHROPIC_PATH, Reply(status=401, body={"error": "x-api-key header is required"}))
    failure = await failure_of(registry, prompt("claude-local"))
    assert failure.code == "unauthenticated"
    assert "llm entry 'claude-local', which sends no API key (it has no api_key_env" in failure.message
    assert "It said: " in failure.message and "x-api-key header is required" in failure.message


async def test_an_anthropic_entry_without_api_key_env_sends_no_key_to_a_local_server(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    result = await run_step(registry, prompt("claude-local"))
    (seen,) = llm.seen
    assert "x-api-key" not in seen.headers and "authorization" not in seen.headers
    assert result["data"]["text"] == "a fine answer"


@pytest.mark.parametrize(
    ("provider", "path"),
    [("gpt-bare-origin", OPENAI_PATH), ("claude-versioned", ANTHROPIC_PATH), ("claude", ANTHROPIC_PATH)],
)
async def test_base_url_with_or_without_its_version_segment_reaches_the_same_endpoint(
    llm: LoopbackLlm, registry: ExecutorRegistry, provider: str, path: str
) -> None:
    await run_step(registry, prompt(provider))
    assert [seen.path for seen in llm.seen] == [path]


async def test_a_reply_slower_than_the_read_timeout_is_a_timeout(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    llm.then(OPENAI_PATH, Reply(delay_s=5))
    started = time.monotonic()
    failure = await failure_of(registry, prompt("gpt-impatient"))
    assert failure.code == "timeout"
    assert time.monotonic() - started < 3  # gave up at the 0.3 s read timeout, not the reply


async def test_a_reply_breaking_the_schema_is_a_retryable_invalid_output_that_still_counts_tokens(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    llm.then(OPENAI_PATH, Reply(text='{"score": "high", "reason": "?"}', input_tokens=9, output_tokens=3))
    failure = await failure_of(registry, prompt("gpt", responseSchema=SCORE_SCHEMA))
    assert failure.code == "invalid_output"
    assert "score" in failure.message and "integer" in failure.message
    assert failure.usage is not None and failure.usage["totalTokens"] == 12
    assert RetryEngine().decide({"retry": {"maxRetries": 1}}, failure.code, 0, "s").retry is True


async def test_a_reply_that_is_not_json_is_invalid_output(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    llm.then(ANTHROPIC_PATH, Reply(text="Sure! Here is the JSON you asked for"))
    failure = await failure_of(registry, prompt("claude", responseSchema=SCORE_SCHEMA))
    assert failure.code == "invalid_output"


async def test_an_unset_api_key_variable_is_permanent_and_names_the_variable(
    llm: LoopbackLlm, registry: ExecutorRegistry
) -> None:
    failure = await failure_of(registry, prompt("claude-keyless"))
    assert failure.code == "permanent"
    assert "MCPRT_TEST_UNSET_KEY" in failure.message
    assert llm.seen == []  # nothing was sent without a key


async def test_the_template_provider_stays_the_offline_default(registry: ExecutorRegistry) -> None:
    step = prompt("template")
    result = await run_step(
        registry, step.model_copy(update={"config": {"template": "Rate {candidate.name}"}})
    )
    assert result["provider"] == "template" and result["model"] == "template-v1"
    assert result["data"]["text"].startswith("[template-v1 ")
    assert "usage" not in result


# Submit-time checks


def prompt_pipeline(**config: Any) -> Any:
    return parse_pipeline(
        {
            "name": "ask",
            "steps": [{"name": "ask", "stepKey": "ai.prompt", "config": {"template": "hi", **config}}],
        }
    )


@pytest.mark.parametrize(
    ("config", "rule", "fragment"),
    [
        ({"provider": "gpt-5"}, "provider_configured", "'gpt-5'"),
        ({"provider": "gpt", "params": {"messages": []}}, "step_config", "params"),
        ({"provider": "gpt", "responseSchema": {"type": "no-such-type"}}, "step_config", "responseSchema"),
    ],
)
async def test_a_prompt_config_this_runtime_cannot_serve_is_refused_at_validation(
    services: EngineServices, config: dict[str, Any], rule: str, fragment: str
) -> None:
    with pytest.raises(InvalidPipelineError) as refused:
        services.engine.validate(prompt_pipeline(**config))
    assert refused.value.rule == rule
    assert fragment in refused.value.message and "'ask'" in refused.value.message


# Through the engine: retry timing, the ledger, metrics, and no key anywhere


@pytest.fixture
async def services(
    llm: LoopbackLlm,
    loopback: tuple[LoopbackLlm, str],
    redis_server: EmbeddedRedis,
    tmp_path: Path,
) -> AsyncIterator[EngineServices]:
    providers_file = tmp_path / "providers.json"
    providers_file.write_text(json.dumps(provider_settings(loopback[1])), encoding="utf-8")
    settings = RuntimeSettings(
        data_dir=tmp_path / "data",
        redis_url=redis_server.url,
        redis_prefix=f"llm{secrets.token_hex(4)}:",
        providers_file=providers_file,
    )
    async with EngineServices(settings) as started:
        yield started


async def run_pipeline(services: EngineServices, steps: list[dict[str, Any]]) -> tuple[str, str]:
    pipeline = parse_pipeline({"name": "llm-run", "steps": steps})
    execution_id = await services.engine.create_execution(pipeline, {"name": "Ada"}, SNAPSHOT)
    status = await services.engine.run(execution_id, workers=2)
    await services.audit.flush()
    return execution_id, status


def ask(name: str, provider: str, **config: Any) -> dict[str, Any]:
    retry = {"maxRetries": 2, "baseDelayMs": 1}
    base = {"template": "Rate {name}", "provider": provider, "retry": retry}
    return {
        "name": name,
        "stepKey": "ai.prompt",
        "input": {"name": "state.name"},
        "config": {**base, **config},
    }


async def ledger(services: EngineServices, execution_id: str, event: str) -> list[dict[str, Any]]:
    entries = await services.durable_store.list_ledger(TENANT, execution_id)
    return [entry.attributes for entry in entries if entry.event == event]


async def last_error_reason(services: EngineServices, execution_id: str) -> str:
    """Why the retry engine decided as it did for the step's last failure (kept after a success)."""
    view = await services.dag_store.read_execution(execution_id)
    assert view is not None and view.steps[0].last_error is not None
    return view.steps[0].last_error.reason


async def test_the_engine_waits_for_retry_after_before_the_next_attempt(
    llm: LoopbackLlm, services: EngineServices
) -> None:
    llm.then(OPENAI_PATH, Reply(status=429, body={"error": "rate"}, headers={"Retry-After": "1"}))
    execution_id, status = await run_pipeline(services, [ask("ask", "gpt")])
    assert status == "Completed"
    first, second = llm.seen
    (scheduled,) = await ledger(services, execution_id, "step.retry_scheduled")
    assert scheduled["code"] == "transient"
    # Redis time is whole milliseconds, the loopback server's sub-millisecond: 1 ms of slack.
    assert scheduled["next_retry_at_ms"] >= first.at_ms + 1000 - 1
    assert second.at_ms >= first.at_ms + 1000 - 1


async def test_without_a_retry_section_transient_failures_are_retried_by_the_default_policy(
    llm: LoopbackLlm, services: EngineServices
) -> None:
    llm.then(OPENAI_PATH, Reply(status=503, body={}), Reply(status=500, body={}))
    step = ask("ask", "gpt")
    del step["config"]["retry"]
    execution_id, status = await run_pipeline(services, [step])
    assert status == "Completed" and len(llm.seen) == 3
    scheduled = await ledger(services, execution_id, "step.retry_scheduled")
    assert [entry["code"] for entry in scheduled] == ["transient", "transient"]
    reason = await last_error_reason(services, execution_id)
    assert "Retry 2 of 3 for failure code 'transient' allowed by policy 'retry.transient.default'" in reason


async def test_a_retry_section_replaces_the_default_policy(
    llm: LoopbackLlm, services: EngineServices
) -> None:
    llm.then(OPENAI_PATH, Reply(status=503, body={}))
    execution_id, status = await run_pipeline(services, [ask("ask", "gpt", retry={"maxRetries": 0})])
    assert status == "Failed" and len(llm.seen) == 1
    (failed,) = await ledger(services, execution_id, "step.failed")
    assert failed["code"] == "transient"
    assert "maxRetries=0" in await last_error_reason(services, execution_id)


async def test_a_retry_after_longer_than_the_maximum_delay_waits_only_the_maximum_delay(
    llm: LoopbackLlm, services: EngineServices
) -> None:
    llm.then(OPENAI_PATH, Reply(status=429, body={}, headers={"Retry-After": "3600"}))
    retry = {"maxRetries": 1, "baseDelayMs": 1, "maxDelayMs": 200}
    execution_id, status = await run_pipeline(services, [ask("ask", "gpt", retry=retry)])
    assert status == "Completed"
    (scheduled,) = await ledger(services, execution_id, "step.retry_scheduled")
    assert scheduled["code"] == "transient"
    reason = await last_error_reason(services, execution_id)
    assert "next attempt in 200 ms (the provider's Retry-After, capped at maxDelayMs=200)" in reason


async def test_token_usage_reaches_the_step_ledger_entry_and_the_metrics(
    llm: LoopbackLlm, services: EngineServices
) -> None:
    schema = {"responseSchema": SCORE_SCHEMA}
    llm.then(OPENAI_PATH, Reply(text='{"score": "x"}', input_tokens=5, output_tokens=2))
    llm.then(OPENAI_PATH, Reply(text='{"score": 3, "reason": "ok"}', input_tokens=5, output_tokens=4))
    execution_id, status = await run_pipeline(services, [ask("ask", "gpt", **schema)])
    assert status == "Completed"
    (retried,) = await ledger(services, execution_id, "step.retry_scheduled")
    (completed,) = await ledger(services, execution_id, "step.completed")
    assert retried["code"] == "invalid_output" and retried["usage"]["totalTokens"] == 7
    assert completed["usage"] == {
        "provider": "gpt",
        "model": "gpt-loopback",
        "inputTokens": 5,
        "outputTokens": 4,
        "totalTokens": 9,
    }
    metrics = services.audit.metrics
    labels = {"provider": "gpt", "model": "gpt-loopback"}
    assert metrics.value("mcprt_llm_tokens_total", {**labels, "kind": "input"}) == 10
    assert metrics.value("mcprt_llm_tokens_total", {**labels, "kind": "output"}) == 6


@contextlib.contextmanager
def every_log_record(caplog: pytest.LogCaptureFixture) -> Iterator[list[logging.LogRecord]]:
    caplog.set_level(logging.DEBUG)
    yield caplog.records


def _as_text(record: logging.LogRecord) -> str:
    return f"{record.getMessage()} {record.__dict__!r} {record.exc_text or ''}"


async def _redis_values(services: EngineServices) -> list[bytes]:
    redis = services.hot_state.redis
    values: list[bytes] = []
    async for key in redis.scan_iter(match=f"{services.settings.redis_prefix}*"):
        kind = await redis.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            values.append(await redis.get(key))
        elif kind == "hash":
            values += [f"{k}={v}".encode() for k, v in (await redis.hgetall(key)).items()]
        elif kind == "zset":
            values += [str(m).encode() for m in await redis.zrange(key, 0, -1)]
        elif kind == "list":
            values += [str(m).encode() for m in await redis.lrange(key, 0, -1)]
        elif kind == "set":
            values += [str(m).encode() for m in await redis.smembers(key)]
    return [v if isinstance(v, bytes) else str(v).encode() for v in values]


async def test_the_api_key_appears_in_no_log_record_or_stored_document(
    llm: LoopbackLlm, services: EngineServices, caplog: pytest.LogCaptureFixture
) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}
    llm.then(
        OPENAI_PATH, Reply(status=429, body=echo, headers={"Retry-After": "0"}), Reply(status=401, body=echo)
    )
    llm.then(ANTHROPIC_PATH, Reply(status=500, body=echo), Reply(text="not json"))
    llm.then(ANTHROPIC_PATH, Reply(text=json.dumps({"score": 1, "reason": "fits"})))
    with every_log_record(caplog) as records:
        execution_id, status = await run_pipeline(
            services,
            [ask("openai", "gpt"), ask("anthropic", "claude", responseSchema=SCORE_SCHEMA)],
        )
        assert status == "Failed"  # the 401 failed `openai` for good
        assert len(llm.seen) == 5 and all(API_KEY in json.dumps(s.headers) for s in llm.seen)
        snapshot = await services.durable_store.get_snapshot(execution_id, TENANT)
        assert snapshot is not None
        spans = await services.durable_store.list_spans(TENANT, execution_id)
        entries = await services.durable_store.list_ledger(TENANT, execution_id)
        stored = [snapshot.model_dump_json(), *(s.model_dump_json() for s in spans)]
        stored += [entry.model_dump_json() for entry in entries]
        redis_values = await _redis_values(services)
        logged = [_as_text(record) for record in records]
    assert any("[redacted]" in text for text in stored)  # the echoed key was there to leak, and did not
    assert not [text for text in stored if API_KEY in text]
    assert not [value for value in redis_values if API_KEY.encode() in value]
    assert logged and not [text for text in logged if API_KEY in text]
    files = [path for path in services.settings.data_dir.rglob("*") if path.is_file()]
    assert files and not [path for path in files if API_KEY.encode() in path.read_bytes()]


async def test_a_runtime_instance_process_calls_the_provider_named_in_the_providers_file(
    llm: LoopbackLlm,
    loopback: tuple[LoopbackLlm, str],
    hot_state: HotState,
    redis_server: EmbeddedRedis,
    tmp_path: Path,
) -> None:
    settings = provider_settings(loopback[1])
    providers_file = tmp_path / "providers.json"
    providers_file.write_text(json.dumps(settings), encoding="utf-8")
    providers = StepProviders.build(StepProviderSettings.model_validate(settings))
    pipeline = parse_pipeline({"name": "remote-ask", "steps": [ask("ask", "claude")]})
    llm.then(ANTHROPIC_PATH, Reply(text="from the child", input_tokens=3, output_tokens=2))
    async with hosted_control_plane(
        hot_state,
        redis_server,
        tmp_path,
        executors=[AiPromptExecutor(providers.llm)],  # the control plane validates `claude` at submit
        providers_file=providers_file,
    ) as plane:
        await start_shared_host(plane, HostTransport.HTTP, pool_size=1)
        submitted = await plane.submit(pipeline, {"name": "Ada"}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.drain(10, DEFAULT_TENANT)
        await wait_local_status(plane, submitted.shared_run_id, DEFAULT_TENANT, LocalRunStatus.COMPLETED)
    await providers.aclose()
    (seen,) = llm.seen
    assert seen.headers["x-api-key"] == API_KEY  # the child read the key from its inherited environment
    assert seen.body["messages"] == [{"role": "user", "content": "Rate Ada"}]
