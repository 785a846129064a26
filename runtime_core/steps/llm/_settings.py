"""Configured LLM provider entries: one pydantic model per provider kind, chosen by `kind`.

Owns the fields of an `llm` entry of the providers file (snake_case, like the server
config) and what `base_url` means for every kind: the provider's API root, with or without its
version segment (`https://api.openai.com`, `https://api.openai.com/v1`, `https://api.anthropic.com`
and `https://api.anthropic.com/v1` all work). A bare origin gets the kind's `/v1`; an OpenAI-kind
URL with a path is used as written (Azure deployments, gateways' own prefixes); an Anthropic URL
ends with `/v1` (added when missing), the Messages path being `/messages` under it. Secrets are
never fields: an entry names the environment variable that holds its API key (`api_key_env`,
optional: local servers take none). Must not open connections.
"""

from __future__ import annotations

from typing import Annotated, Literal

import httpx
from pydantic import Field, field_validator

from runtime_core.steps._http_endpoint import HttpEndpointSettings

API_VERSION_SEGMENT = "/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"


def _bare_origin(base_url: str) -> bool:
    return httpx.URL(base_url).path in ("", "/")


class OpenAiCompatibleSettings(HttpEndpointSettings):
    """Chat Completions at `base_url + path`: OpenAI, Azure OpenAI, vLLM, llama.cpp server, Ollama.

    `api_key_env` None sends no key (local servers). Azure OpenAI: `api_key_header: "api-key"`
    and, for deployment URLs, `query: {"api-version": "..."}`.
    """

    kind: Literal["openai"]
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    api_key_header: Literal["authorization", "api-key"] = "authorization"
    path: str = "/chat/completions"
    query: dict[str, str] = {}

    @field_validator("base_url")
    @classmethod
    def _versioned(cls, base_url: str) -> str:
        """A bare origin is the API root of version 1; a URL with a path is used as written."""
        return base_url + API_VERSION_SEGMENT if _bare_origin(base_url) else base_url


class AnthropicSettings(HttpEndpointSettings):
    """The Anthropic Messages API (`POST <base_url ending with /v1>/messages`). `api_key_env` None
    sends no `x-api-key` (local Anthropic-compatible servers)."""

    kind: Literal["anthropic"]
    base_url: str = ANTHROPIC_BASE_URL
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    anthropic_version: str = ANTHROPIC_VERSION
    max_tokens: int = Field(default=1024, ge=1)

    @field_validator("base_url")
    @classmethod
    def _versioned(cls, base_url: str) -> str:
        """The Messages API lives under `/v1` of whatever root the URL names."""
        return base_url if base_url.endswith(API_VERSION_SEGMENT) else base_url + API_VERSION_SEGMENT


LlmProviderSettings = Annotated[OpenAiCompatibleSettings | AnthropicSettings, Field(discriminator="kind")]
