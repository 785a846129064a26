"""RetentionEngine: evaluates the configured Retention policies against an execution's stats.

Owns `RetentionStats`, `RetentionDecision` and the trigger evaluation (first policy whose
trigger fires wins, in declaration order). Stateless and deterministic. Must not read or
write any store: the compactor applies the decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime_core.policy import PolicyDefinition, PolicyKind, PolicyRegistry, default_policy_registry
from runtime_core.retention._config import RetentionConfig
from runtime_core.retention._policies import (
    RetentionPolicy,
    RetentionStrategy,
    RetentionTriggers,
    register_retention_policies,
)


@dataclass(frozen=True)
class RetentionStats:
    """What the triggers look at, read from Redis in one round trip."""

    completed_count: int
    completed_since_pass: int
    hot_result_bytes: int
    age_ms: int


class RetentionDecision(BaseModel):
    model_config = ConfigDict(frozen=True)

    policy: str
    strategy: RetentionStrategy
    trigger: str
    compact_min_bytes: int


class RetentionEngine:
    def __init__(self, registry: PolicyRegistry | None = None) -> None:
        self._registry = registry or register_retention_policies(default_policy_registry())

    def validate(self, pipeline_config: dict[str, Any] | None) -> RetentionConfig | None:
        """Parse `config.retention` and check every policy name and config; raise typed."""
        config = RetentionConfig.from_pipeline_config(pipeline_config)
        if config is not None:
            for policy, definition in self._resolve(config):
                policy.parse(definition.config)
        return config

    def decide(self, config: RetentionConfig, stats: RetentionStats) -> RetentionDecision | None:
        if stats.completed_since_pass < 1:
            return None
        for policy, definition in self._resolve(config):
            policy_config = policy.parse(definition.config)
            trigger = _fired(config.triggers.overridden_by(policy_config.triggers), stats)
            if trigger is not None:
                min_bytes = policy_config.compact_min_bytes
                return RetentionDecision(
                    policy=policy.name,
                    strategy=policy.strategy,
                    trigger=trigger,
                    compact_min_bytes=config.compact_min_bytes if min_bytes is None else min_bytes,
                )
        return None

    def _resolve(self, config: RetentionConfig) -> list[tuple[RetentionPolicy, PolicyDefinition]]:
        return self._registry.resolve_all(PolicyKind.RETENTION, config.policies, RetentionPolicy)


def _fired(triggers: RetentionTriggers, stats: RetentionStats) -> str | None:
    if triggers.completed_steps is not None and stats.completed_since_pass >= triggers.completed_steps:
        return "completedSteps"
    if triggers.payload_bytes is not None and stats.hot_result_bytes >= triggers.payload_bytes:
        return "payloadBytes"
    if triggers.duration_ms is not None and stats.age_ms >= triggers.duration_ms:
        return "durationMs"
    return None
