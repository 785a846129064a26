"""The provider selector: which provider reaches a runtime instance, which one scales out.

Owns the lookup by the registry metadata `provider.name`, whether an instance is reachable
from this process now (an in-process instance only from the process hosting it, a remote
one not while its provider backs off after a dispatch got no answer), and the
scale-out choice by hint (first scale-out-capable provider otherwise). Must not choose runtime instances.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from runtime_core.instances import InstanceDescriptor
from runtime_core.providers._protocol import ProviderError, RuntimeProvider, ScaleOutProvider


@runtime_checkable
class _Closable(Protocol):
    async def aclose(self) -> None: ...


@runtime_checkable
class _ProcessBound(Protocol):
    """A provider that reaches only some instances from this process now (the in-process one:
    those it hosts; a remote one: those whose last dispatch was answered, or long enough ago)."""

    def reaches(self, runtime_instance_id: str) -> bool: ...


class ProviderSelector:
    def __init__(self, providers: Iterable[RuntimeProvider]) -> None:
        self._providers: dict[str, RuntimeProvider] = {}
        for provider in providers:
            self.add(provider)

    def add(self, provider: RuntimeProvider) -> None:
        """Register (or replace) the provider serving `provider.metadata.provider_name`."""
        self._providers[provider.metadata.provider_name] = provider

    async def aclose(self) -> None:
        """Close the providers that hold connections (HTTP clients, gRPC channels)."""
        for provider in self._providers.values():
            if isinstance(provider, _Closable):
                await provider.aclose()

    def names(self) -> list[str]:
        return sorted(self._providers)

    def by_name(self, provider_name: str) -> RuntimeProvider:
        provider = self._providers.get(provider_name)
        if provider is None:
            raise ProviderError(
                f"No runtime provider named '{provider_name}' is configured.",
                hint="Configured providers: " + (", ".join(self.names()) or "none"),
            )
        return provider

    def reaches(self, provider_name: str, runtime_instance_id: str) -> bool:
        """Whether a dispatch from this process can reach the instance: its provider is
        configured and, for an in-process instance, this process hosts it; for a remote one,
        its provider is not backing off from an unanswered dispatch to it."""
        provider = self._providers.get(provider_name)
        if provider is None:
            return False
        return not isinstance(provider, _ProcessBound) or provider.reaches(runtime_instance_id)

    def for_instance(self, descriptor: InstanceDescriptor) -> RuntimeProvider:
        return self.by_name(descriptor.provider_name)

    def for_scale_out(self, hint: str | None = None) -> ScaleOutProvider:
        candidates = [p for p in self._providers.values() if isinstance(p, ScaleOutProvider)]
        if hint:
            candidates = [p for p in candidates if p.metadata.provider_name == hint] or candidates
        if not candidates:
            raise ProviderError("No scale-out capable runtime provider is configured.")
        return candidates[0]
