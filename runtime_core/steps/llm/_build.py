"""Building the LLM provider registry: the offline `template` provider plus the configured entries.

Owns the kind -> provider class mapping. Must not read files or the environment.
"""

from __future__ import annotations

from collections.abc import Mapping

from runtime_core.steps.llm._anthropic import AnthropicProvider
from runtime_core.steps.llm._openai import OpenAiCompatibleProvider
from runtime_core.steps.llm._provider import LlmProvider, LlmProviders
from runtime_core.steps.llm._settings import AnthropicSettings, LlmProviderSettings
from runtime_core.steps.llm._template import TEMPLATE_PROVIDER, TemplateLlmProvider


def build_llm_provider(name: str, settings: LlmProviderSettings) -> LlmProvider:
    if isinstance(settings, AnthropicSettings):
        return AnthropicProvider(name, settings)
    return OpenAiCompatibleProvider(name, settings)


def build_llm_providers(configured: Mapping[str, LlmProviderSettings] | None = None) -> LlmProviders:
    """`template` (offline, deterministic) and every configured entry under its name."""
    providers = LlmProviders()
    providers.register(TEMPLATE_PROVIDER, TemplateLlmProvider())
    for name, settings in (configured or {}).items():
        providers.register(name, build_llm_provider(name, settings))
    return providers
