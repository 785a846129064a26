"""LLM providers for `ai.prompt` and `ai.agent`: the contract, the registry, the offline default and
the real ones.

Owns talking to language models: the `template` stand-in (offline, deterministic), an
OpenAI-compatible Chat Completions provider and an Anthropic Messages provider, both over
httpx with connect / read timeouts, configured by name with their API key read from an
environment variable; conversations with tool calls, and streamed replies (Server-Sent
Events) assembled into the same reply. Must not render prompts or shape step results.
"""

from runtime_core.steps.llm._anthropic import ANTHROPIC_RESERVED_PARAMS, AnthropicProvider
from runtime_core.steps.llm._build import build_llm_provider, build_llm_providers
from runtime_core.steps.llm._chat import ChatMessage, TextSink, ToolCall, ToolSpec
from runtime_core.steps.llm._openai import OPENAI_RESERVED_PARAMS, OpenAiCompatibleProvider
from runtime_core.steps.llm._output import INVALID_OUTPUT, check_response_schema, parse_structured_output
from runtime_core.steps.llm._provider import LlmProvider, LlmProviders, LlmReply, LlmRequest, TokenUsage
from runtime_core.steps.llm._settings import AnthropicSettings, LlmProviderSettings, OpenAiCompatibleSettings
from runtime_core.steps.llm._template import TEMPLATE_MODEL, TEMPLATE_PROVIDER, TemplateLlmProvider

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Contract and registry
    "LlmProvider",
    "LlmProviders",
    "LlmRequest",
    "LlmReply",
    "TokenUsage",
    "ChatMessage",
    "ToolCall",
    "ToolSpec",
    "TextSink",
    "build_llm_provider",
    "build_llm_providers",
    # Offline default
    "TemplateLlmProvider",
    "TEMPLATE_PROVIDER",
    "TEMPLATE_MODEL",
    # Real providers and their settings
    "LlmProviderSettings",
    "OpenAiCompatibleProvider",
    "OpenAiCompatibleSettings",
    "OPENAI_RESERVED_PARAMS",
    "AnthropicProvider",
    "AnthropicSettings",
    "ANTHROPIC_RESERVED_PARAMS",
    # Structured output
    "INVALID_OUTPUT",
    "check_response_schema",
    "parse_structured_output",
]
