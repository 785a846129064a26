"""The `rag.retrieval` step config and its submit-time check against the configured retrieval providers.

Owns the config fields (camelCase in pipeline JSON) and the check that (provider, providerKey)
names a configured provider answering `operation`. Must not open a data source.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from runtime_core.steps._config import StepConfig, StepConfigError
from runtime_core.steps.retrieval import EMBEDDED_PROVIDER_TYPE, RetrievalProviders


class RetrievalConfig(StepConfig):
    """`provider` is the provider type (relational, api, document, ...), `providerKey` its configured name."""

    operation: str = Field(min_length=1)
    provider: str = EMBEDDED_PROVIDER_TYPE
    provider_key: str = "default"
    execution_mode: Literal["provider"] = Field(
        default="provider",
        description="Where the operation runs: `provider`, the only mode (pipelines written for the "
        "specification name it).",
    )


def check_retrieval_provider(config: RetrievalConfig, providers: RetrievalProviders) -> None:
    """Raise StepConfigError unless a configured provider answers `config.operation`."""
    provider = providers.get(config.provider, config.provider_key)
    if provider is None:
        raise StepConfigError(
            providers.unknown_message(config.provider, config.provider_key),
            hint=f"Add a 'retrieval' entry named '{config.provider_key}' (provider_type "
            f"'{config.provider}') to the providers file (--providers-file / "
            "MCP_RUNTIME_PROVIDERS_FILE), or use providerKey 'default' for the embedded demo database.",
        )
    if config.operation not in provider.operations:
        raise StepConfigError(
            f"retrieval provider {config.provider}/{config.provider_key} has no operation "
            f"{config.operation!r} (known: {', '.join(provider.operations) or 'none'})",
            hint="Add the operation to that provider's entry in the providers file.",
        )
