"""Policy definitions: the one shape every policy list is parsed into.

Owns `PolicyKind`, `PolicyDefinition` and the parser that accepts both the legacy string
form (`"retry.transient.default"`) and the structured `{name, kind, config}` form (with the
legacy `type` key accepted as `kind`). Must not look policies up or evaluate them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from runtime_core.errors import InvalidPipelineError


class PolicyKind(StrEnum):
    """The engine that evaluates a policy; lookups are always by (kind, name)."""

    RETRY = "Retry"
    RETENTION = "Retention"
    CONCURRENCY = "Concurrency"


class PolicyDefinition(BaseModel):
    """One configured policy. `kind` is metadata only: the evaluating engine fixes the kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    kind: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _accept_legacy_forms(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value}
        if not isinstance(value, dict):
            return value
        normalized = dict(value)
        if "type" in normalized:
            legacy_kind = normalized.pop("type")
            normalized.setdefault("kind", legacy_kind)
        if normalized.get("config", {}) is None:
            normalized["config"] = {}
        return normalized


def _none_is_empty(value: Any) -> Any:
    return [] if value is None else value


PolicyList = Annotated[list[PolicyDefinition], BeforeValidator(_none_is_empty)]
"""Field type for a `policies` list inside a typed config section (strings or objects)."""

_POLICY_LIST = TypeAdapter(PolicyList)


def parse_policy_definitions(raw: Any) -> list[PolicyDefinition]:
    """Parse a `policies` list (legacy strings and structured objects mixed) or raise typed."""
    try:
        return _POLICY_LIST.validate_python(raw)
    except ValidationError as exc:
        raise InvalidPipelineError(
            "policy_definition",
            f"Invalid policy definition: {exc}",
            hint="Use a policy name string or an object {name, kind?, config?}.",
        ) from exc
