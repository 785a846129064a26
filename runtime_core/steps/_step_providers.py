"""The providers file and the provider registries one process builds from it.

Owns `StepProviderSettings` (the JSON file: named `llm` and `retrieval` entries, secrets only
as environment-variable names), loading it with errors that name the file and the field
(never a value), and `StepProviders`: the LLM and retrieval registries built from it,
closed together. Must not read secrets: providers read their environment variables on use.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from runtime_core.errors import ConfigurationError
from runtime_core.flow import ProviderRateLimit, ProviderRateLimits
from runtime_core.steps._config import validation_problems
from runtime_core.steps.llm import TEMPLATE_PROVIDER, LlmProviders, LlmProviderSettings, build_llm_providers
from runtime_core.steps.retrieval import (
    EMBEDDED_RELATIONAL_KEYS,
    RetrievalProviders,
    RetrievalProviderSettings,
    build_retrieval_providers,
)

PROVIDERS_FILE_ENV = "MCP_RUNTIME_PROVIDERS_FILE"


class StepProviderSettings(BaseModel):
    """`{"llm": {name: entry}, "retrieval": {name: entry}, "rate_limits": {budget: limit}}`; each
    entry is chosen by its `kind`; a rate limit is one provider key's budget, shared by the
    entries it lists (`providers`), see docs/flow-control.md."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm: dict[str, LlmProviderSettings] = {}
    retrieval: dict[str, RetrievalProviderSettings] = {}
    rate_limits: dict[str, ProviderRateLimit] = {}

    @model_validator(mode="after")
    def _budgets_name_providers(self) -> StepProviderSettings:
        known = {*self.llm, *self.retrieval, TEMPLATE_PROVIDER, *EMBEDDED_RELATIONAL_KEYS}
        unknown = sorted(self.provider_rate_limits.providers() - known)
        if unknown:
            raise ValueError(f"rate_limits name providers that are not configured: {', '.join(unknown)}")
        return self

    @property
    def provider_rate_limits(self) -> ProviderRateLimits:
        return ProviderRateLimits(budgets=self.rate_limits)

    @field_validator("llm")
    @classmethod
    def _template_is_built_in(cls, llm: dict[str, LlmProviderSettings]) -> dict[str, LlmProviderSettings]:
        if TEMPLATE_PROVIDER in llm:
            raise ValueError(f"'{TEMPLATE_PROVIDER}' is the built-in offline provider: choose another name")
        return llm


def load_provider_settings(path: Path) -> StepProviderSettings:
    """Read the providers file; a missing or invalid file is a ConfigurationError naming the problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigurationError(
            f"Cannot read the providers file {path}: {error.strerror}.",
            hint=f"Fix the path given by --providers-file / {PROVIDERS_FILE_ENV}.",
        ) from None
    try:
        return StepProviderSettings.model_validate_json(text)
    except ValidationError as error:
        raise ConfigurationError(
            f"The providers file {path} is invalid: {validation_problems(error)}",
            hint="See docs/providers.md, 'Configuring an OpenAI-compatible or Anthropic provider'.",
        ) from None


class StepProviders:
    """The LLM and retrieval providers of one process; `aclose()` releases their connections."""

    def __init__(self, llm: LlmProviders, retrieval: RetrievalProviders) -> None:
        self.llm = llm
        self.retrieval = retrieval

    @classmethod
    def build(
        cls, settings: StepProviderSettings | None = None, data_dir: Path | None = None
    ) -> StepProviders:
        """The offline defaults plus every configured entry; the embedded database lives in `data_dir`."""
        settings = settings or StepProviderSettings()
        return cls(build_llm_providers(settings.llm), build_retrieval_providers(settings.retrieval, data_dir))

    async def aclose(self) -> None:
        await self.llm.aclose()
        await self.retrieval.aclose()
