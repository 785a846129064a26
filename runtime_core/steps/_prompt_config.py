"""The `ai.prompt` step config and its submit-time check against the configured LLM providers.

Owns the config fields (camelCase in pipeline JSON) and their validation: `params` may not
replace what the provider sets itself, `responseSchema` must be a valid JSON schema, a model
call's uncertainty policy cannot be `reconcile` (a model provider has no status operation), and
`provider` must name a configured provider. Must not call a provider.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import Field, field_validator

from runtime_core.steps._config import StepConfig, StepConfigError
from runtime_core.steps.llm import (
    ANTHROPIC_RESERVED_PARAMS,
    OPENAI_RESERVED_PARAMS,
    TEMPLATE_PROVIDER,
    LlmProviders,
    check_response_schema,
)
from runtime_core.steps.operations import UncertaintyPolicy

RESERVED_PARAMS = OPENAI_RESERVED_PARAMS | ANTHROPIC_RESERVED_PARAMS


def model_call_policy(policy: UncertaintyPolicy) -> UncertaintyPolicy:
    """What may settle a model call cut by a crash: not `reconcile` (no provider has a status
    operation to ask whether it answered)."""
    if policy is UncertaintyPolicy.RECONCILE:
        raise ValueError("a model call cannot be reconciled (a model provider has no status operation)")
    return policy


class PromptConfig(StepConfig):
    """`model` None: the provider's configured model. `params` go to the provider as-is (temperature, ...).
    `stream`: the reply is streamed; its text so far is visible while the step runs.
    `onUncertain`: what settles a model call whose process died before its reply was kept
    (default `retry`: a model call has no side effect but its cost)."""

    template: str
    provider: str = TEMPLATE_PROVIDER
    model: str | None = None
    system: str | None = None
    params: dict[str, Any] = {}
    response_schema: dict[str, Any] | None = None
    schema_name: str = Field(default="output", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    schema_strict: bool = True
    stream: bool = False
    on_uncertain: UncertaintyPolicy = UncertaintyPolicy.RETRY

    _model_call_policy = field_validator("on_uncertain")(model_call_policy)

    @field_validator("params")
    @classmethod
    def _no_reserved_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(RESERVED_PARAMS & set(params))
        if reserved:
            raise ValueError(f"params may not set {', '.join(reserved)}: the provider sets them")
        return params

    @field_validator("response_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            check_response_schema(schema)
        return schema


class NamesProvider(Protocol):
    provider: str


def check_prompt_provider(config: NamesProvider, providers: LlmProviders) -> None:
    """Raise StepConfigError when `config.provider` is not configured in this runtime."""
    if config.provider not in providers:
        raise StepConfigError(
            providers.unknown_message(config.provider),
            hint=f"Add an 'llm' entry named '{config.provider}' to the providers file "
            "(--providers-file / MCP_RUNTIME_PROVIDERS_FILE), "
            f"or use the offline provider '{TEMPLATE_PROVIDER}'.",
        )
