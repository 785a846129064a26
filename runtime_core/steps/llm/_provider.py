"""The LLM provider contract `ai.prompt` and `ai.agent` call, and the registry of providers by name.

Owns the request / reply / token-usage models, the `LlmProvider` protocol (one completion,
streamed to a `TextSink` when one is given: the reply is the same either way) and provider
lookup by name (`config.provider` of a step). Must not render templates, shape step results
or speak any provider's wire format.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.llm._chat import ChatMessage, TextSink, ToolCall, ToolSpec


class TokenUsage(BaseModel):
    """Tokens one call consumed, as the provider reported them."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def from_reply(cls, body: dict[str, Any], input_field: str, output_field: str) -> TokenUsage:
        """The counts in a reply's `usage` object; a missing or malformed count is 0."""
        usage = body.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return cls(input_tokens=_count(usage.get(input_field)), output_tokens=_count(usage.get(output_field)))

    def record(self, provider: str, model: str) -> dict[str, Any]:
        """The `usage` entry of a step result / ledger event (camelCase like the rest of the result)."""
        return {
            "provider": provider,
            "model": model,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
        }


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class LlmRequest(BaseModel):
    """One completion: the rendered prompt (or a conversation) and how to ask for it.

    `messages`, when given, is the conversation after the system text (a tool-calling loop);
    otherwise `prompt` is its one user message. `tools` are offered to the model.
    `model` None means the provider's configured model. `response_schema` (a JSON schema)
    asks for structured output in the provider's own response-format field; the caller still
    validates what comes back.
    """

    model_config = ConfigDict(frozen=True)

    prompt: str = ""
    messages: list[ChatMessage] = []
    tools: list[ToolSpec] = []
    model: str | None = None
    system: str | None = None
    params: dict[str, Any] = {}
    response_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    schema_strict: bool = True

    def conversation(self) -> list[ChatMessage]:
        """The messages to send: `messages`, or `prompt` as the one user message."""
        return list(self.messages) or [ChatMessage(role="user", text=self.prompt)]


class LlmReply(BaseModel):
    """The model's turn: its text, the tools it calls (a tool-calling request) and what it cost."""

    model_config = ConfigDict(frozen=True)

    text: str
    model: str
    usage: TokenUsage | None = None
    tool_calls: list[ToolCall] = []
    stop_reason: str | None = None


@runtime_checkable
class LlmProvider(Protocol):
    default_model: str

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmReply:
        """Return the completion; raise StepFailure with a retry code on provider errors.

        With `on_text` the provider streams: each piece of text goes to it as it arrives, and
        the reply returned is the one the same call without streaming gives.
        """
        ...


class LlmProviders:
    """Registry of LLM providers by name; closes the ones holding connections."""

    def __init__(self) -> None:
        self._providers: dict[str, LlmProvider] = {}

    def register(self, name: str, provider: LlmProvider) -> None:
        self._providers[name] = provider

    def __contains__(self, name: object) -> bool:
        return name in self._providers

    def resolve(self, name: str) -> LlmProvider:
        provider = self._providers.get(name)
        if provider is None:
            raise StepFailure(self.unknown_message(name), code="permanent")
        return provider

    def unknown_message(self, name: str) -> str:
        known = ", ".join(self.names()) or "none"
        return f"no LLM provider is configured as {name!r} (configured: {known})"

    def names(self) -> list[str]:
        return sorted(self._providers)

    async def aclose(self) -> None:
        for provider in self._providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
