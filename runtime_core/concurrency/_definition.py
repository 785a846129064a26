"""The `config.concurrency` section at pipeline and step level, parsed and merged.

Owns `ConcurrencyDefinition`, `ConcurrencyScope` (the Redis enforcement scopes) and the
pipeline+step merge. Must not apply throttle rules or talk to Redis.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy import PolicyList


class ConcurrencyScope(StrEnum):
    """Distributed enforcement scopes, in the order leases are checked."""

    GLOBAL = "global"
    PIPELINE = "pipeline"
    PIPELINE_STEP = "pipeline-step"
    EXECUTION = "execution"
    INSTANCE = "instance"
    PROVIDER = "provider"
    MODEL = "model"
    OPERATION = "operation"


_LIMIT_FIELD_BY_SCOPE: dict[ConcurrencyScope, str] = {
    ConcurrencyScope.GLOBAL: "max_global_concurrency",
    ConcurrencyScope.PIPELINE: "max_pipeline_concurrency",
    ConcurrencyScope.PIPELINE_STEP: "max_step_concurrency",
    ConcurrencyScope.EXECUTION: "max_execution_concurrency",
    ConcurrencyScope.INSTANCE: "max_instance_concurrency",
    ConcurrencyScope.PROVIDER: "max_provider_concurrency",
    ConcurrencyScope.MODEL: "max_model_concurrency",
    ConcurrencyScope.OPERATION: "max_operation_concurrency",
}


class ConcurrencyDefinition(BaseModel):
    """One `config.concurrency` section. `None` means "not declared here" (merge-friendly)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    enabled: bool | None = None
    max_degree_of_parallelism: int | None = Field(default=None, ge=1)
    max_global_concurrency: int | None = Field(default=None, ge=0)
    max_pipeline_concurrency: int | None = Field(default=None, ge=0)
    max_step_concurrency: int | None = Field(default=None, ge=0)
    max_execution_concurrency: int | None = Field(default=None, ge=0)
    max_instance_concurrency: int | None = Field(default=None, ge=0)
    max_provider_concurrency: int | None = Field(default=None, ge=0)
    max_model_concurrency: int | None = Field(default=None, ge=0)
    max_operation_concurrency: int | None = Field(default=None, ge=0)
    lease_seconds: int | None = Field(default=None, ge=1)
    default_retry_after_ms: int | None = Field(default=None, ge=0)
    jitter: bool | None = None
    policies: PolicyList = Field(default_factory=list)

    def direct_limit(self, scope: ConcurrencyScope) -> int | None:
        limit: int | None = getattr(self, _LIMIT_FIELD_BY_SCOPE[scope])
        return limit

    def overridden_by(self, step: ConcurrencyDefinition) -> ConcurrencyDefinition:
        """Step values win field by field; policies of both levels apply (pipeline first)."""
        merged = {
            name: getattr(step, name) if getattr(step, name) is not None else getattr(self, name)
            for name in type(self).model_fields
            if name != "policies"
        }
        return ConcurrencyDefinition(**merged, policies=[*self.policies, *step.policies])


def parse_concurrency_definition(config: dict[str, Any] | None) -> ConcurrencyDefinition | None:
    """Parse `config["concurrency"]` of a pipeline or step; absent -> None; bad -> typed error."""
    section = (config or {}).get("concurrency")
    if section is None:
        return None
    try:
        return ConcurrencyDefinition.model_validate(section)
    except ValidationError as exc:
        raise InvalidPipelineError(
            "concurrency_config",
            f"Invalid config.concurrency: {exc}",
            hint="See the config.concurrency fields: enabled, maxDegreeOfParallelism, "
            "max*Concurrency limits, leaseSeconds, defaultRetryAfterMs, jitter, policies.",
        ) from exc


def merge_concurrency_definitions(
    pipeline: ConcurrencyDefinition | None, step: ConcurrencyDefinition | None
) -> ConcurrencyDefinition | None:
    if pipeline is None or step is None:
        return step or pipeline
    return pipeline.overridden_by(step)
