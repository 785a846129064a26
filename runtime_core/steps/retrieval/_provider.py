"""The retrieval provider contract `rag.retrieval` calls, and the registry by (provider type, key).

Owns the `RetrievalProvider` protocol (named operations answered with JSON values), the
(provider type, provider key) -> provider mapping, the messages naming what is configured,
and closing providers that hold connections. Must not shape step results or open sources.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from runtime_core.steps._executor import StepFailure


@runtime_checkable
class RetrievalProvider(Protocol):
    """A data source answering named operations (`candidate.byId`, ...) with JSON values."""

    @property
    def operations(self) -> tuple[str, ...]:
        """The operation names this provider answers (checked when a pipeline is submitted)."""
        ...

    async def retrieve(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | list[Any]:
        """Return the operation's rows; raise StepFailure(code="not_found"|"permanent"|...)."""
        ...


class RetrievalProviders:
    """Registry of retrieval providers by (provider type, provider key)."""

    def __init__(self) -> None:
        self._providers: dict[tuple[str, str], RetrievalProvider] = {}

    def register(self, provider_type: str, provider_key: str, provider: RetrievalProvider) -> None:
        self._providers[(provider_type, provider_key)] = provider

    def get(self, provider_type: str, provider_key: str) -> RetrievalProvider | None:
        return self._providers.get((provider_type, provider_key))

    def resolve(self, provider_type: str, provider_key: str) -> RetrievalProvider:
        provider = self.get(provider_type, provider_key)
        if provider is None:
            raise StepFailure(self.unknown_message(provider_type, provider_key), code="permanent")
        return provider

    def unknown_message(self, provider_type: str, provider_key: str) -> str:
        known = ", ".join(f"{kind}/{key}" for kind, key in self.keys()) or "none"
        return f"no retrieval provider is configured for {provider_type}/{provider_key} (configured: {known})"

    def keys(self) -> list[tuple[str, str]]:
        return sorted(self._providers)

    async def aclose(self) -> None:
        """Close each distinct provider once (one provider may serve several keys)."""
        closed: set[int] = set()
        for provider in self._providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None and id(provider) not in closed:
                closed.add(id(provider))
                await close()
