"""Configured LLM provider entries: one pydantic model per provider kind, chosen by `kind`.

Owns the fields of an `llm` entry of the providers file (snake_case, like the server
config). Secrets are never fields: an entry names the environment variable that holds
its API key (`api_key_env`). Must not open connections.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from runtime_core.steps._http_endpoint import HttpEndpointSettings

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class OpenAiCompatibleSettings(HttpEndpointSettings):
    """Chat Completions at `base_url + path`: OpenAI, Azure OpenAI, vLLM, llama.cpp server, Ollama.

    `api_key_env` None sends no key (local servers). Azure OpenAI: `api_key_header: "api-key"`
    and, for deployment URLs, `query: {"api-version": "..."}`.
    """

    kind: Literal["openai"]
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    api_key_header: Literal["authorization", "api-key"] = "authorization"
    path: str = "/chat/completions"
    query: dict[str, str] = {}


class AnthropicSettings(HttpEndpointSettings):
    """The Anthropic Messages API (`POST base_url/v1/messages`)."""

    kind: Literal["anthropic"]
    base_url: str = ANTHROPIC_BASE_URL
    model: str = Field(min_length=1)
    api_key_env: str = Field(min_length=1)
    anthropic_version: str = ANTHROPIC_VERSION
    max_tokens: int = Field(default=1024, ge=1)


LlmProviderSettings = Annotated[OpenAiCompatibleSettings | AnthropicSettings, Field(discriminator="kind")]
