"""Concurrency admission rules: allow or deny a step before any Redis capacity is taken.

Owns the configs of `concurrency.provider.admission`, `concurrency.model.admission` and
`concurrency.operation.admission`, each answering with a denial reason or None. Must not
touch Redis or count capacity.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from runtime_core.concurrency._context import ConcurrencyContext

_RULE_CONFIG = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class ProviderAdmissionRule(BaseModel):
    """`allowedProviders` absent = any provider; `requireProvider` denies steps without one."""

    model_config = _RULE_CONFIG

    allowed_providers: list[str] | None = None
    require_provider: bool = False
    retry_after_ms: int | None = Field(default=None, ge=0)

    def deny_reason(self, context: ConcurrencyContext) -> str | None:
        if context.provider is None:
            if self.require_provider:
                return (
                    f"Step '{context.step_name}' declares no provider, but concurrency policy requires one."
                )
            return None
        if self.allowed_providers is not None and context.provider not in self.allowed_providers:
            return f"Provider '{context.provider}' is blocked by concurrency policy."
        return None


class ModelAdmissionRule(BaseModel):
    """`allowedModels` entries are `provider:model` or a bare model name."""

    model_config = _RULE_CONFIG

    allowed_models: list[str] | None = None
    require_model: bool = False
    retry_after_ms: int | None = Field(default=None, ge=0)

    def deny_reason(self, context: ConcurrencyContext) -> str | None:
        if context.model is None:
            if self.require_model:
                return f"Step '{context.step_name}' declares no model, but concurrency policy requires one."
            return None
        if self.allowed_models is not None and not (
            context.model_key in self.allowed_models or context.model in self.allowed_models
        ):
            return f"Model '{context.model_key}' is blocked by concurrency policy."
        return None


class OperationAdmissionRule(BaseModel):
    """`allowedOperations` absent = any operation."""

    model_config = _RULE_CONFIG

    allowed_operations: list[str] | None = None
    require_operation: bool = False
    retry_after_ms: int | None = Field(default=None, ge=0)

    def deny_reason(self, context: ConcurrencyContext) -> str | None:
        if context.operation is None:
            if self.require_operation:
                return (
                    f"Step '{context.step_name}' declares no operation, but concurrency policy requires one."
                )
            return None
        if self.allowed_operations is not None and context.operation not in self.allowed_operations:
            return f"Operation '{context.operation}' is blocked by concurrency policy."
        return None


AdmissionRule = ProviderAdmissionRule | ModelAdmissionRule | OperationAdmissionRule
