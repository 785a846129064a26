"""Tool calling and streaming against loopback servers speaking the real OpenAI Chat Completions and
Anthropic Messages wire formats: the request each provider sends for a conversation with tool
calls and results, the tool calls read back, and a streamed reply (Server-Sent Events) equal to
the same call unstreamed, its text arriving in pieces."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from runtime_core.steps import StepFailure, StepProviders, StepProviderSettings
from runtime_core.steps.llm import (
    ChatMessage,
    LlmProviders,
    LlmRequest,
    OpenAiCompatibleProvider,
    OpenAiCompatibleSettings,
    ToolCall,
    ToolSpec,
)
from tests.agent_support import API_KEY, KEY_ENV, LoopbackLlm, llm_settings
from tests.loopback import serving

WEATHER = ToolSpec(
    name="weather",
    description="The weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SCRIPT = [
    {"text": "Let me look.", "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
    {"text": "It is sunny in Oslo, 21 degrees: a fine day for a walk along the fjord."},
]
CONVERSATION = [
    ChatMessage(role="user", text="Weather in Oslo?"),
    ChatMessage(
        role="assistant",
        text="Let me look.",
        tool_calls=[ToolCall(id="call_0_0", name="weather", arguments={"city": "Oslo"})],
    ),
    ChatMessage(role="tool", tool_call_id="call_0_0", text='{"sky": "sunny", "temp_c": 21}'),
]


@pytest.fixture(scope="module")
async def loopback() -> AsyncIterator[tuple[LoopbackLlm, str]]:
    server = LoopbackLlm(SCRIPT)
    async with serving(server.app) as base_url:
        yield server, base_url


@pytest.fixture
async def providers(
    loopback: tuple[LoopbackLlm, str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[LlmProviders]:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    loopback[0].requests.clear()
    built = StepProviders.build(StepProviderSettings.model_validate({"llm": llm_settings(loopback[1])}))
    yield built.llm
    await built.aclose()


async def test_openai_sends_tools_assistant_tool_calls_and_tool_results(
    loopback: tuple[LoopbackLlm, str], providers: LlmProviders
) -> None:
    request = LlmRequest(system="Be brief.", messages=CONVERSATION[:1], tools=[WEATHER])
    reply = await providers.resolve("gpt").complete(request)
    assert reply.tool_calls == [ToolCall(id="call_0_0", name="weather", arguments={"city": "Oslo"})]
    assert (reply.text, reply.stop_reason) == ("Let me look.", "tool_calls")
    (sent,) = loopback[0].requests
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "The weather in a city.",
                "parameters": WEATHER.input_schema,
            },
        }
    ]
    await providers.resolve("gpt").complete(LlmRequest(messages=CONVERSATION, tools=[WEATHER]))
    assert loopback[0].requests[1]["messages"] == [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_0_0",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0_0", "content": '{"sky": "sunny", "temp_c": 21}'},
    ]


async def test_anthropic_sends_tool_use_blocks_and_tool_results_in_one_user_turn(
    loopback: tuple[LoopbackLlm, str], providers: LlmProviders
) -> None:
    second_call = ToolCall(id="toolu_0_1", name="weather", arguments={"city": "Bergen"})
    conversation = [
        CONVERSATION[0],
        CONVERSATION[1].model_copy(update={"tool_calls": [*CONVERSATION[1].tool_calls, second_call]}),
        CONVERSATION[2],
        ChatMessage(role="tool", tool_call_id="toolu_0_1", text="no such city", is_error=True),
    ]
    reply = await providers.resolve("claude").complete(LlmRequest(messages=conversation, tools=[WEATHER]))
    assert reply.tool_calls == [] and reply.text.startswith("It is sunny")
    assert reply.stop_reason == "end_turn"
    (sent,) = loopback[0].requests
    assert sent["tools"] == [
        {"name": "weather", "description": "The weather in a city.", "input_schema": WEATHER.input_schema}
    ]
    assert sent["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_0_0", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_0_1", "name": "weather", "input": {"city": "Bergen"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_0_0",
                    "content": '{"sky": "sunny", "temp_c": 21}',
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_0_1",
                    "content": "no such city",
                    "is_error": True,
                },
            ],
        },
    ]


@pytest.mark.parametrize("provider", ["gpt", "claude"])
@pytest.mark.parametrize("turns", [1, 3], ids=["tool-call", "final-text"])
async def test_a_streamed_reply_equals_the_whole_one_and_arrives_in_pieces(
    loopback: tuple[LoopbackLlm, str], providers: LlmProviders, provider: str, turns: int
) -> None:
    request = LlmRequest(messages=CONVERSATION[:turns], tools=[WEATHER])
    whole = await providers.resolve(provider).complete(request)
    pieces: list[str] = []

    async def collect(text: str) -> None:
        pieces.append(text)

    streamed = await providers.resolve(provider).complete(request, collect)
    assert streamed == whole
    assert len(pieces) > 1 and "".join(pieces) == whole.text
    assert streamed.usage is not None and streamed.usage.input_tokens > 0 and streamed.usage.output_tokens > 0
    assert loopback[0].requests[-1]["stream"] is True


async def test_a_stream_answered_with_plain_json_is_a_transient_failure() -> None:
    async def plain(request: Request) -> JSONResponse:
        return JSONResponse({"choices": []})

    app = Starlette(routes=[Route("/v1/chat/completions", plain, methods=["POST"])])
    async with serving(app) as base_url:
        settings = OpenAiCompatibleSettings(kind="openai", base_url=f"{base_url}/v1", model="m")
        provider = OpenAiCompatibleProvider("plain", settings)
        try:
            with pytest.raises(StepFailure) as failure:
                await provider.complete(LlmRequest(prompt="hi"), _ignore)
        finally:
            await provider.aclose()
    assert failure.value.code == "transient" and "event stream" in failure.value.message


async def _ignore(text: str) -> None:
    return None
