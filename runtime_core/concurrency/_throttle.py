"""Generic `concurrency.throttle` rules: which steps they match and which limit they fill.

Owns `ThrottleScope` and `ThrottleRule`. Must not override a direct `config.concurrency`
value: rules only fill limits that were not declared directly (see resolution).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from runtime_core.concurrency._context import ConcurrencyContext
from runtime_core.concurrency._definition import ConcurrencyScope


class ThrottleScope(StrEnum):
    """What a throttle rule's `target` is compared with."""

    PROVIDER = "provider"
    MODEL = "model"
    OPERATION = "operation"
    STEP = "step"
    STEP_TYPE = "step-type"
    PIPELINE = "pipeline"


_ENFORCED_SCOPE: dict[ThrottleScope, ConcurrencyScope] = {
    ThrottleScope.PROVIDER: ConcurrencyScope.PROVIDER,
    ThrottleScope.MODEL: ConcurrencyScope.MODEL,
    ThrottleScope.OPERATION: ConcurrencyScope.OPERATION,
    ThrottleScope.STEP: ConcurrencyScope.PIPELINE_STEP,
    ThrottleScope.STEP_TYPE: ConcurrencyScope.PIPELINE_STEP,
    ThrottleScope.PIPELINE: ConcurrencyScope.PIPELINE,
}


class ThrottleRule(BaseModel):
    """Config of one `concurrency.throttle` policy; no `target` = every value of the scope."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    scope: ThrottleScope
    target: str | None = None
    limit: int = Field(ge=0)
    lease_seconds: int | None = Field(default=None, ge=1)
    default_retry_after_ms: int | None = Field(default=None, ge=0)

    @property
    def enforced_scope(self) -> ConcurrencyScope:
        """The Redis scope whose limit this rule fills."""
        return _ENFORCED_SCOPE[self.scope]

    def matches(self, context: ConcurrencyContext) -> bool:
        value = self._context_value(context)
        return value is not None and (self.target is None or self.target == value)

    def _context_value(self, context: ConcurrencyContext) -> str | None:
        values: dict[ThrottleScope, str | None] = {
            ThrottleScope.PROVIDER: context.provider,
            ThrottleScope.MODEL: context.model_key,
            ThrottleScope.OPERATION: context.operation,
            ThrottleScope.STEP: context.step_name,
            ThrottleScope.STEP_TYPE: context.step_key,
            ThrottleScope.PIPELINE: context.pipeline_key,
        }
        return values[self.scope]
