"""The `config.retry` section of a step, parsed.

Owns `RetryConfig` and `RetryStrategy` and the raw-dict parser. Must not decide retries:
that is the retry engine's job.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from runtime_core.errors import InvalidPipelineError, closest_name
from runtime_core.policy._definition import PolicyList

DEFAULT_BASE_DELAY_MS = 500
DEFAULT_MAX_DELAY_MS = 30_000


class RetryStrategy(StrEnum):
    FIXED = "Fixed"
    EXPONENTIAL = "Exponential"


class RetryConfig(BaseModel):
    """Retry configuration. Absent section = the step type's default (`PROVIDER_RETRY` for
    provider-backed steps), else no retries (`max_retries` 0)."""

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
    def parse(cls, section: Any, where: str = "config.retry") -> RetryConfig:
        """A `retry` section; a bad one raises InvalidPipelineError naming `where` (and, for a
        misspelled key, the key meant)."""
        hint = "Fields: policies, maxRetries, strategy (Fixed|Exponential), baseDelayMs, maxDelayMs, jitter."
        try:
            return cls.model_validate(section or {})
        except ValidationError as exc:
            raise InvalidPipelineError(
                "retry_config", f"Invalid {where}: {_misspelled(section) or exc}", hint=hint
            ) from exc

    @classmethod
    def from_step_config(cls, step_config: dict[str, Any] | None) -> RetryConfig:
        """Parse `step_config["retry"]`; a bad section raises InvalidPipelineError."""
        return cls.parse((step_config or {}).get("retry"))


def _misspelled(section: Any) -> str | None:
    """`unknown key ...: did you mean ...?` for the first key of `section` no field spells."""
    if not isinstance(section, dict):
        return None
    fields = RetryConfig.model_fields
    spelled = [field.alias or name for name, field in fields.items()]
    unknown = [key for key in section if key not in spelled and key not in fields]
    if not unknown:
        return None
    meant = closest_name(unknown[0], spelled)
    guess = f": did you mean `{meant}`?" if meant else f" (known keys: {', '.join(spelled)})"
    return f"unknown key `{unknown[0]}`{guess}"


PROVIDER_RETRY: dict[str, Any] = {
    "policies": ["retry.transient.default", "retry.timeout.default"],
    "maxRetries": 3,
    "strategy": "Exponential",
    "baseDelayMs": 1_000,
    "maxDelayMs": 30_000,
    "jitter": True,
}
"""The retry of a step that calls a provider (LLM, HTTP) when its config has no `retry` section:
failures coded `transient` (429, 503 and other 5xx, connection errors) or `timeout` (timeouts,
408) are tried again up to 3 times, after 1 s, 2 s and 4 s (equal jitter: half to all of it,
fixed per attempt), a `Retry-After` honoured up to 30 s. Any `retry` section replaces it."""
