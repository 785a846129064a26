"""Retry policies: classify a failure code as retryable or not.

Owns the `RetryPolicy` contract, its structured outcome and the built-in code-matching
policies (`retry.transient.default`, `retry.timeout.default`). Must not compute delays or
count attempts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy._definition import PolicyKind
from runtime_core.policy._registry import Policy

TRANSIENT_POLICY = "retry.transient.default"
TIMEOUT_POLICY = "retry.timeout.default"


class RetryPolicyOutcome(BaseModel):
    """What one retry policy said about one failure."""

    model_config = ConfigDict(frozen=True)

    policy: str
    matched: bool
    max_retries: int | None = None


class CodeRetryPolicyConfig(BaseModel):
    """Structured config of a code-matching policy; `maxRetries` overrides the section's."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    code: str | None = None
    max_retries: int | None = Field(default=None, ge=0)


class RetryPolicy(Policy, ABC):
    """A policy the retry engine evaluates against a failure code."""

    kind = PolicyKind.RETRY

    @abstractmethod
    def validate_config(self, config: dict[str, Any]) -> None:
        """Raise InvalidPipelineError when `config` is not valid for this policy."""

    @abstractmethod
    def evaluate(self, config: dict[str, Any], failure_code: str) -> RetryPolicyOutcome:
        """Say whether a failure with `failure_code` is retryable under this policy."""


class CodeRetryPolicy(RetryPolicy):
    """Retries failures whose code equals `config.code` (default: `default_code`)."""

    def __init__(self, name: str, default_code: str) -> None:
        super().__init__(name)
        self.default_code = default_code

    def validate_config(self, config: dict[str, Any]) -> None:
        self._parse(config)

    def evaluate(self, config: dict[str, Any], failure_code: str) -> RetryPolicyOutcome:
        parsed = self._parse(config)
        return RetryPolicyOutcome(
            policy=self.name,
            matched=failure_code == (parsed.code or self.default_code),
            max_retries=parsed.max_retries,
        )

    def _parse(self, config: dict[str, Any]) -> CodeRetryPolicyConfig:
        try:
            return CodeRetryPolicyConfig.model_validate(config)
        except ValidationError as exc:
            raise InvalidPipelineError(
                "retry_policy_config",
                f"Invalid config for retry policy '{self.name}': {exc}",
                hint="Fields: code, maxRetries.",
            ) from exc


def builtin_retry_policies() -> list[RetryPolicy]:
    return [
        CodeRetryPolicy(TRANSIENT_POLICY, default_code="transient"),
        CodeRetryPolicy(TIMEOUT_POLICY, default_code="timeout"),
    ]
