"""The runtime concurrency context of one step about to run.

Owns `ConcurrencyContext`: which pipeline, step, execution, instance, provider, model and
operation a step belongs to, and the scope key parts derived from them. Must not hold any
limit or policy.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from runtime_core.concurrency._definition import ConcurrencyScope
from runtime_core.errors import InvalidPipelineError


def pipeline_key_of(pipeline_name: str, pipeline_version: str) -> str:
    """The stable pipeline key `name:version` used by pipeline scopes and throttle targets."""
    return f"{pipeline_name}:{pipeline_version}"


class ConcurrencyContext(BaseModel):
    """Identity of one step attempt as the concurrency engine sees it."""

    model_config = ConfigDict(frozen=True)

    pipeline_key: str
    step_name: str
    step_key: str
    execution_id: str | None = None
    runtime_instance_id: str | None = None
    provider: str | None = None
    model: str | None = None
    operation: str | None = None

    @classmethod
    def for_step(
        cls,
        *,
        pipeline_name: str,
        pipeline_version: str,
        step_name: str,
        step_key: str,
        step_config: dict[str, Any] | None,
        execution_id: str | None = None,
        runtime_instance_id: str | None = None,
    ) -> ConcurrencyContext:
        """Build the context; provider/model/operation come from the step `config` keys."""
        config = step_config or {}
        try:
            return cls(
                pipeline_key=pipeline_key_of(pipeline_name, pipeline_version),
                step_name=step_name,
                step_key=step_key,
                execution_id=execution_id,
                runtime_instance_id=runtime_instance_id,
                provider=config.get("provider") or None,
                model=config.get("model") or None,
                operation=config.get("operation") or None,
            )
        except ValidationError as exc:
            raise InvalidPipelineError(
                "step_concurrency_identity",
                f"Step '{step_name}' has a non-string provider, model or operation: {exc}",
                hint="config.provider, config.model and config.operation must be strings.",
            ) from exc

    @property
    def model_key(self) -> str | None:
        """The normalized `{provider}:{model}` pair (bare model when no provider is set)."""
        if self.model is None:
            return None
        return f"{self.provider}:{self.model}" if self.provider else self.model

    def scope_key_parts(self, scope: ConcurrencyScope) -> tuple[str, ...] | None:
        """The scope's key parts (its hash tag is `concurrency:<parts>`); None when this context
        has no such value."""
        parts: dict[ConcurrencyScope, tuple[str | None, ...]] = {
            ConcurrencyScope.GLOBAL: (),
            ConcurrencyScope.PIPELINE: (self.pipeline_key,),
            ConcurrencyScope.PIPELINE_STEP: (self.pipeline_key, self.step_key),
            ConcurrencyScope.EXECUTION: (self.execution_id,),
            ConcurrencyScope.INSTANCE: (self.runtime_instance_id,),
            ConcurrencyScope.PROVIDER: (self.provider,),
            ConcurrencyScope.MODEL: (self.model_key,),
            ConcurrencyScope.OPERATION: (self.operation,),
        }
        values = parts[scope]
        if any(value is None for value in values):
            return None
        return (scope.value, *(value for value in values if value is not None))
