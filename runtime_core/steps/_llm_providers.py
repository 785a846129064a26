"""LLM providers: the interface `ai.prompt` calls, their registry, and the deterministic default.

Owns provider lookup by name. Must not render templates or shape step results. Real
providers (OpenAI, Azure OpenAI, local models) implement `LlmProvider` and are registered
under their own name; none is required by the runtime.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._results import sha256_hex

SUMMARY_CHARS = 160


@runtime_checkable
class LlmProvider(Protocol):
    async def complete(self, prompt: str, model: str, params: dict[str, Any]) -> str:
        """Return the completion text; raise StepFailure with a retry code on provider errors."""
        ...


class TemplateLlmProvider:
    """Deterministic stand-in: a stable summary of the prompt tagged with its sha256 prefix."""

    async def complete(self, prompt: str, model: str, params: dict[str, Any]) -> str:
        digest = sha256_hex(f"{model}\n{prompt}")[:16]
        flattened = " ".join(prompt.split())
        summary = flattened if len(flattened) <= SUMMARY_CHARS else f"{flattened[:SUMMARY_CHARS]}..."
        return f"[{model} {digest}] {summary}"


class LlmProviders:
    """Registry of LLM providers by name (`config.provider` of an `ai.prompt` step)."""

    def __init__(self) -> None:
        self._providers: dict[str, LlmProvider] = {}

    def register(self, name: str, provider: LlmProvider) -> None:
        self._providers[name] = provider

    def resolve(self, name: str) -> LlmProvider:
        provider = self._providers.get(name)
        if provider is None:
            known = ", ".join(self.names()) or "none"
            raise StepFailure(
                f"no LLM provider registered as {name!r} (registered: {known})", code="permanent"
            )
        return provider

    def names(self) -> list[str]:
        return sorted(self._providers)


def default_llm_providers() -> LlmProviders:
    providers = LlmProviders()
    providers.register("template", TemplateLlmProvider())
    return providers
