"""The built-in Retention-kind policies of Policy Engine V2 and their registration.

Owns `RetentionStrategy`, `RetentionTriggers`, `RetentionPolicy` (a registry entry that
fixes a strategy and parses its structured config) and `register_retention_policies`.
Must not evaluate triggers or apply anything.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy import Policy, PolicyKind, PolicyRegistry

COMPACT_POLICY = "retention.compact.default"
EVICT_POLICY = "retention.evict.default"
HYBRID_POLICY = "retention.hybrid.default"

_CAMEL = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class RetentionStrategy(StrEnum):
    COMPACT = "compact"  # externalize completed results still inline; keep a ref in Redis
    EVICT = "evict"  # drop hot results whose readers all completed; keep an archived copy
    HYBRID = "hybrid"  # compact now, evict once safe

    @property
    def compacts(self) -> bool:
        return self is not RetentionStrategy.EVICT

    @property
    def evicts(self) -> bool:
        return self is not RetentionStrategy.COMPACT


class RetentionTriggers(BaseModel):
    """When a pass runs (any one suffices, and only after a step completed since the last pass).

    completedSteps: steps completed since the last pass; payloadBytes: bytes the execution's
    results occupy in Redis (MEMORY USAGE of its result hash); durationMs: execution age.
    """

    model_config = _CAMEL

    completed_steps: int | None = Field(default=None, ge=1)
    payload_bytes: int | None = Field(default=None, ge=0)
    duration_ms: int | None = Field(default=None, ge=0)

    def overridden_by(self, other: RetentionTriggers | None) -> RetentionTriggers:
        if other is None:
            return self
        return self.model_copy(update=other.model_dump(exclude_none=True))


class RetentionPolicyConfig(BaseModel):
    """A policy's own `config`: triggers and minimum size override the section's."""

    model_config = _CAMEL

    triggers: RetentionTriggers | None = None
    compact_min_bytes: int | None = Field(default=None, ge=0)


class RetentionPolicy(Policy):
    """A Retention policy applies one strategy when one of its triggers fires."""

    kind = PolicyKind.RETENTION

    def __init__(self, name: str, strategy: RetentionStrategy) -> None:
        super().__init__(name)
        self.strategy = strategy

    def parse(self, config: dict[str, Any]) -> RetentionPolicyConfig:
        try:
            return RetentionPolicyConfig.model_validate(config)
        except ValidationError as exc:
            raise InvalidPipelineError(
                "retention_policy_config",
                f"Invalid config for retention policy '{self.name}': {exc}",
                hint="Fields: triggers {completedSteps, payloadBytes, durationMs}, compactMinBytes.",
            ) from exc


def builtin_retention_policies() -> list[RetentionPolicy]:
    return [
        RetentionPolicy(COMPACT_POLICY, RetentionStrategy.COMPACT),
        RetentionPolicy(EVICT_POLICY, RetentionStrategy.EVICT),
        RetentionPolicy(HYBRID_POLICY, RetentionStrategy.HYBRID),
    ]


def register_retention_policies(registry: PolicyRegistry) -> PolicyRegistry:
    """Add the built-in Retention policies to `registry` and return it."""
    for policy in builtin_retention_policies():
        registry.register(policy)
    return registry
