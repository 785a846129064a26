"""OpenTelemetry spans of an agent, in the GenAI semantic conventions: `invoke_agent`, `chat`, `execute_tool`.

Owns span names and `gen_ai.*` attributes (operation, provider, request / response model,
token usage, finish reasons, agent and tool names, tool call id). The spans nest under the
current span (the step's); a replayed sub-step (recorded before a crash) gets no new span.
Every helper is a no-op while tracing is off. Must not change what it observes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, SpanKind, StatusCode

from runtime_core.observability import runtime_tracer, tracing_enabled
from runtime_core.steps import StepFailure
from runtime_core.steps.llm import AnthropicProvider, LlmProvider, LlmReply, OpenAiCompatibleProvider


def provider_system(provider: LlmProvider) -> str:
    """`gen_ai.provider.name`: the wire format's vendor, or the offline provider's name."""
    if isinstance(provider, AnthropicProvider):
        return "anthropic"
    if isinstance(provider, OpenAiCompatibleProvider):
        return "openai"
    return "template"


@contextmanager
def _span(name: str, kind: SpanKind, attributes: dict[str, Any]) -> Iterator[Span | None]:
    if not tracing_enabled():
        yield None
        return
    with runtime_tracer().start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except StepFailure as failure:
            span.set_attribute("error.type", failure.code)
            span.set_status(StatusCode.ERROR, failure.message)
            raise


def invoke_agent_span(agent: str, provider: LlmProvider, model: str) -> Any:
    return _span(
        f"invoke_agent {agent}",
        SpanKind.INTERNAL,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.provider.name": provider_system(provider),
            "gen_ai.request.model": model,
        },
    )


def chat_span(provider: LlmProvider, model: str, turn: int) -> Any:
    return _span(
        f"chat {model}",
        SpanKind.CLIENT,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_system(provider),
            "gen_ai.request.model": model,
            "mcprt.agent.turn": turn,
        },
    )


def record_reply(span: Span | None, reply: LlmReply) -> None:
    if span is None:
        return
    span.set_attribute("gen_ai.response.model", reply.model)
    if reply.stop_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [reply.stop_reason])
    if reply.usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", reply.usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", reply.usage.output_tokens)


def execute_tool_span(tool: str, call_id: str, kind: str) -> Any:
    return _span(
        f"execute_tool {tool}",
        SpanKind.INTERNAL,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": kind,
        },
    )
