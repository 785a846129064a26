"""The `rag.retrieval` executor: run one named operation against the configured provider.

Owns reading the retrieval config and shaping the result. Must not open data sources itself:
that is the provider's job (see `runtime_core.steps.retrieval`).
"""

from __future__ import annotations

from typing import Any

from runtime_core.policy import PROVIDER_RETRY
from runtime_core.steps._config import parse_config
from runtime_core.steps._executor import StepInvocation
from runtime_core.steps._results import step_result
from runtime_core.steps._retrieval_config import RetrievalConfig, check_retrieval_provider
from runtime_core.steps.retrieval import RetrievalProviders


class RagRetrievalExecutor:
    """`config.operation` with the step's resolved inputs as parameters, e.g. `candidateId`."""

    step_key = "rag.retrieval"
    config_model = RetrievalConfig
    description = "Run a named retrieval operation on a configured provider, the inputs as parameters."
    default_retry = PROVIDER_RETRY

    def __init__(self, providers: RetrievalProviders) -> None:
        self._providers = providers

    def check_config(self, config: RetrievalConfig) -> None:
        """Submit-time: the provider is configured here and answers the operation."""
        check_retrieval_provider(config, self._providers)

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(RetrievalConfig, invocation)
        provider = self._providers.resolve(config.provider, config.provider_key)
        rows = await provider.retrieve(config.operation, dict(invocation.inputs))
        return step_result(
            rows, operation=config.operation, provider=config.provider, providerKey=config.provider_key
        )
