"""Where users declare flow control, and the checks that refuse a bad declaration.

Owns the three declarations and their loading, each refused with a typed error naming the
place and the problem (never started with, never half applied):
- a pipeline's `config.flow` (`PipelineFlow`: its concurrency key and its run rate limits),
  checked wherever a pipeline is validated (rule `flow_valid`);
- the tenants file's `rateLimits` section (`TenantRateLimits`: per tenant, `default` for the
  others), read where the tenants file is;
- the providers file's `rate_limits` section (`ProviderRateLimits`: one named budget shared by
  the provider entries that use one provider key).
Must not touch Redis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from runtime_core.errors import ConfigurationError
from runtime_core.flow._rate_limits import NAME_PATTERN, NamedRateLimit, RateLimit

DEFAULT_TENANT_KEY = "default"
KEY_EXPRESSION_PATTERN = r"^input(\.[A-Za-z0-9_-]+)+$"


def problems(error: ValidationError) -> str:
    """Pydantic's errors as `where: what` (never the offending value: it may be a secret)."""
    described = []
    for detail in error.errors():
        where = ".".join(str(part) for part in detail["loc"]) or "(top level)"
        described.append(f"{where}: {detail['msg'].removeprefix('Value error, ')}")
    return "; ".join(described)


def _unique_names(limits: Iterable[NamedRateLimit]) -> None:
    names = [limit.name for limit in limits]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"rate limit names must be unique: {', '.join(duplicates)}")


class ConcurrencyStrategy(StrEnum):
    """What happens to a run whose key already has `limit` runs."""

    QUEUE = "queue"  # it waits its turn in the key's line (queue order)
    CANCEL_NEWEST = "cancel-newest"  # it is cancelled at once
    CANCEL_IN_PROGRESS = "cancel-in-progress"  # the key's oldest runs are cancelled: the newest win
    ROUND_ROBIN = "round-robin"  # it waits, and the waiting keys take turns


class ConcurrencyKey(BaseModel):
    """At most `limit` active runs per value of `key` (a path into the run's input)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=KEY_EXPRESSION_PATTERN, max_length=200)
    limit: int = Field(ge=1, le=10_000)
    strategy: ConcurrencyStrategy = ConcurrencyStrategy.QUEUE


class PipelineFlow(BaseModel):
    """A pipeline's `config.flow` (camelCase, like the pipeline JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    concurrency: ConcurrencyKey | None = None
    rate_limits: tuple[NamedRateLimit, ...] = ()

    @model_validator(mode="after")
    def _names_unique(self) -> PipelineFlow:
        _unique_names(self.rate_limits)
        if any(limit.at != "submit" for limit in self.rate_limits):
            raise ValueError("a pipeline's rate limits apply at submit (dispatch limits are per tenant)")
        return self

    @classmethod
    def of_config(cls, config: dict[str, Any]) -> PipelineFlow:
        """The `flow` entry of a pipeline's `config` (none: nothing declared); ValueError naming
        the problem otherwise."""
        raw = config.get("flow")
        if raw is None:
            return NO_FLOW
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            raise ValueError(f"config.flow is invalid: {problems(error)}") from None


NO_FLOW = PipelineFlow()


class TenantRateLimits:
    """`{"rateLimits": {"<tenant id>" | "default": [{name, limit, period, burst}, ...]}}` of the
    tenants file: limits on the runs a tenant submits (a tenant without an entry gets `default`)."""

    def __init__(self, tenants: dict[str, tuple[NamedRateLimit, ...]] | None = None) -> None:
        self._tenants = dict(tenants or {})
        self._default = self._tenants.pop(DEFAULT_TENANT_KEY, ())

    @classmethod
    def from_mapping(cls, raw: object, *, where: str = "rateLimits") -> TenantRateLimits:
        try:
            parsed = _TenantLimitsFile.model_validate({"rate_limits": raw})
        except ValidationError as error:
            raise ConfigurationError(
                f"The rateLimits section of {where} is invalid: {problems(error)}",
                hint='Each tenant maps to a list of {"name", "limit", "period", "burst"} '
                "(docs/flow-control.md).",
            ) from None
        return cls(parsed.rate_limits)

    def of_tenant(self, tenant_id: str) -> tuple[NamedRateLimit, ...]:
        return self._tenants.get(tenant_id, self._default)


class _TenantLimitsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rate_limits: dict[str, tuple[NamedRateLimit, ...]]

    @model_validator(mode="after")
    def _names_unique(self) -> _TenantLimitsFile:
        for limits in self.rate_limits.values():
            _unique_names(limits)
        return self


class ProviderRateLimit(RateLimit):
    """One provider key's budget: the provider entries (by name) whose calls share it."""

    providers: tuple[str, ...] = Field(min_length=1)


class ProviderRateLimits(BaseModel):
    """The providers file's `rate_limits` section: `{"<budget name>": {limit, period, burst,
    providers: [...]}}`. A provider entry belongs to at most one budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    budgets: dict[str, ProviderRateLimit] = {}

    @model_validator(mode="after")
    def _one_budget_per_provider(self) -> ProviderRateLimits:
        seen: dict[str, str] = {}
        for name, budget in self.budgets.items():
            if re.match(NAME_PATTERN, name) is None:
                raise ValueError(f"rate limit name {name!r} must be letters, digits, '_', '.', ':' or '-'")
            for provider in budget.providers:
                if provider in seen:
                    raise ValueError(
                        f"provider {provider!r} is in two rate limits ({seen[provider]}, {name})"
                    )
                seen[provider] = name
        return self

    def of_provider(self, provider: str | None) -> tuple[str, ProviderRateLimit] | None:
        """(budget name, budget) of the provider entry `provider`, if it has one."""
        if provider is None:
            return None
        return next(((n, b) for n, b in self.budgets.items() if provider in b.providers), None)

    def providers(self) -> set[str]:
        return {provider for budget in self.budgets.values() for provider in budget.providers}
