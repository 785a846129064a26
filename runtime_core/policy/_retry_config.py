"""The `config.retry` section of a step, parsed.

Owns `RetryConfig` and `RetryStrategy` and the raw-dict parser. Must not decide retries:
that is the retry engine's job.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy._definition import PolicyList

DEFAULT_BASE_DELAY_MS = 500
DEFAULT_MAX_DELAY_MS = 30_000


class RetryStrategy(StrEnum):
    FIXED = "Fixed"
    EXPONENTIAL = "Exponential"


class RetryConfig(BaseModel):
    """Retry configuration. Absent section = no retries (`max_retries` 0)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    policies: PolicyList = Field(default_factory=list)
    max_retries: int = Field(default=0, ge=0)
    strategy: RetryStrategy = RetryStrategy.FIXED
    base_delay_ms: int = Field(default=DEFAULT_BASE_DELAY_MS, ge=0)
    max_delay_ms: int = Field(default=DEFAULT_MAX_DELAY_MS, ge=0)
    jitter: bool = False

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_ignores_case(cls, value: Any) -> Any:
        if isinstance(value, str):
            for strategy in RetryStrategy:
                if strategy.value.lower() == value.lower():
                    return strategy
        return value

    @classmethod
    def from_step_config(cls, step_config: dict[str, Any] | None) -> RetryConfig:
        """Parse `step_config["retry"]`; a bad section raises InvalidPipelineError."""
        section = (step_config or {}).get("retry")
        try:
            return cls.model_validate(section or {})
        except ValidationError as exc:
            raise InvalidPipelineError(
                "retry_config",
                f"Invalid config.retry: {exc}",
                hint="Fields: policies, maxRetries, strategy (Fixed|Exponential), "
                "baseDelayMs, maxDelayMs, jitter.",
            ) from exc
