"""The pipeline's `config.retention` section, parsed.

Owns `RetentionConfig`: the Retention policies to evaluate (legacy names or `{name, kind,
config}` objects), the default triggers and the minimum size worth compacting. Accepts the
shorthands `"retention": "<policy>"` and `"retention": ["<policy>", ...]`. Must not decide.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy import PolicyList
from runtime_core.retention._policies import RetentionTriggers

DEFAULT_COMPACT_MIN_BYTES = 512
DEFAULT_TRIGGERS = RetentionTriggers(completed_steps=16, payload_bytes=1024 * 1024)


class RetentionConfig(BaseModel):
    """A `triggers` object given here replaces the defaults as a whole (absent = disabled)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    policies: PolicyList = Field(default_factory=list)
    triggers: RetentionTriggers = DEFAULT_TRIGGERS
    compact_min_bytes: int = Field(default=DEFAULT_COMPACT_MIN_BYTES, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _accept_shorthands(cls, value: Any) -> Any:
        if isinstance(value, str | list):
            return {"policies": [value] if isinstance(value, str) else value}
        return value

    @classmethod
    def from_pipeline_config(cls, pipeline_config: dict[str, Any] | None) -> RetentionConfig | None:
        """The parsed section, or None when retention is not configured (or lists no policy)."""
        section = (pipeline_config or {}).get("retention")
        if section is None:
            return None
        try:
            config = cls.model_validate(section)
        except ValidationError as exc:
            raise InvalidPipelineError(
                "retention_config",
                f"Invalid config.retention: {exc}",
                hint="Use a policy name, a list of policies, or {policies, triggers, compactMinBytes}.",
            ) from exc
        return config if config.policies else None
