"""Effective concurrency of one step: merged config + throttle rules + admission rules.

Owns `resolve_effective_concurrency` and its result types: which scope leases a step must
take (scope key parts, limit, retry-after) and which admission rules apply. Pure: must not
touch Redis or claim anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime_core.concurrency._admission_rules import AdmissionRule
from runtime_core.concurrency._context import ConcurrencyContext
from runtime_core.concurrency._definition import (
    ConcurrencyDefinition,
    ConcurrencyScope,
    merge_concurrency_definitions,
    parse_concurrency_definition,
)
from runtime_core.concurrency._policies import ConcurrencyPolicy, register_concurrency_policies
from runtime_core.concurrency._throttle import ThrottleRule
from runtime_core.policy import PolicyKind, PolicyRegistry, default_policy_registry

DEFAULT_LEASE_SECONDS = 300
DEFAULT_RETRY_AFTER_MS = 250

_DEFAULT_REGISTRY = register_concurrency_policies(default_policy_registry())


class ScopeLimit(BaseModel):
    """One Redis scope a step must hold a lease in, e.g. parts ("provider", "openai")."""

    model_config = ConfigDict(frozen=True)

    scope: ConcurrencyScope
    key_parts: tuple[str, ...]
    limit: int
    retry_after_ms: int

    @property
    def key_suffix(self) -> str:
        """`provider:openai`, `pipeline-step:content-generation:1:llm.summary`, ..."""
        return ":".join(self.key_parts)


class AdmissionCheck(BaseModel):
    """An admission rule and the policy name it came from."""

    model_config = ConfigDict(frozen=True)

    policy: str
    rule: AdmissionRule


class EffectiveConcurrency(BaseModel):
    """Everything the gate needs for one step; `scopes` is empty when nothing is limited."""

    model_config = ConfigDict(frozen=True)

    context: ConcurrencyContext
    enabled: bool
    max_degree_of_parallelism: int | None = None
    scopes: tuple[ScopeLimit, ...] = ()
    admission: tuple[AdmissionCheck, ...] = ()
    lease_ms: int = DEFAULT_LEASE_SECONDS * 1000
    default_retry_after_ms: int = DEFAULT_RETRY_AFTER_MS
    jitter: bool = False

    @property
    def requires_lease(self) -> bool:
        return self.enabled and bool(self.scopes)


def resolve_effective_concurrency(
    pipeline_config: dict[str, Any] | None,
    step_config: dict[str, Any] | None,
    context: ConcurrencyContext,
    registry: PolicyRegistry | None = None,
) -> EffectiveConcurrency:
    """Merge pipeline and step `config.concurrency`, fill limits from matching throttle rules.

    Direct `max*Concurrency` values stay authoritative; throttle rules only fill the limits
    left unset (the most restrictive matching rule wins). Raises InvalidPipelineError (or
    its subclass UnknownPolicyError) for a bad section or an unregistered policy name.
    """
    definition = merge_concurrency_definitions(
        parse_concurrency_definition(pipeline_config), parse_concurrency_definition(step_config)
    )
    if definition is None:
        return EffectiveConcurrency(context=context, enabled=False)
    rules = _parse_policy_rules(definition, registry or _DEFAULT_REGISTRY)
    if definition.enabled is False:
        return EffectiveConcurrency(context=context, enabled=False)
    throttles = [rule for _, rule in rules if isinstance(rule, ThrottleRule) and rule.matches(context)]
    retry_after_ms = _default(definition.default_retry_after_ms, DEFAULT_RETRY_AFTER_MS)
    scopes, throttles_used = _scope_limits(definition, context, throttles, retry_after_ms)
    return EffectiveConcurrency(
        context=context,
        enabled=True,
        max_degree_of_parallelism=definition.max_degree_of_parallelism,
        scopes=tuple(scopes),
        admission=tuple(
            AdmissionCheck(policy=name, rule=rule)
            for name, rule in rules
            if not isinstance(rule, ThrottleRule)
        ),
        lease_ms=_lease_seconds(definition, throttles_used) * 1000,
        default_retry_after_ms=retry_after_ms,
        jitter=bool(definition.jitter),
    )


def _parse_policy_rules(
    definition: ConcurrencyDefinition, registry: PolicyRegistry
) -> list[tuple[str, ThrottleRule | AdmissionRule]]:
    resolved = registry.resolve_all(PolicyKind.CONCURRENCY, definition.policies, ConcurrencyPolicy)
    rules: list[tuple[str, ThrottleRule | AdmissionRule]] = []
    for policy, policy_definition in resolved:
        rule = policy.parse(policy_definition.config)
        if not isinstance(rule, ThrottleRule | AdmissionRule):
            raise TypeError(f"{policy!r} parsed into an unsupported rule {type(rule).__name__}.")
        rules.append((policy.name, rule))
    return rules


def _scope_limits(
    definition: ConcurrencyDefinition,
    context: ConcurrencyContext,
    throttles: list[ThrottleRule],
    default_retry_after_ms: int,
) -> tuple[list[ScopeLimit], list[ThrottleRule]]:
    """Limits per scope the context can be keyed in: direct value first, else tightest rule."""
    scopes: list[ScopeLimit] = []
    throttles_used: list[ThrottleRule] = []
    for scope in ConcurrencyScope:
        key_parts = context.scope_key_parts(scope)
        if key_parts is None:
            continue
        direct = definition.direct_limit(scope)
        if direct is not None:
            limit, retry_after_ms = direct, default_retry_after_ms
        elif rule := _tightest_rule(throttles, scope):
            throttles_used.append(rule)
            limit, retry_after_ms = rule.limit, _default(rule.default_retry_after_ms, default_retry_after_ms)
        else:
            continue
        scopes.append(
            ScopeLimit(scope=scope, key_parts=key_parts, limit=limit, retry_after_ms=retry_after_ms)
        )
    return scopes, throttles_used


def _tightest_rule(throttles: list[ThrottleRule], scope: ConcurrencyScope) -> ThrottleRule | None:
    candidates = [rule for rule in throttles if rule.enforced_scope is scope]
    return min(candidates, key=lambda rule: rule.limit, default=None)


def _lease_seconds(definition: ConcurrencyDefinition, throttles_used: list[ThrottleRule]) -> int:
    if definition.lease_seconds is not None:
        return definition.lease_seconds
    from_rules = [rule.lease_seconds for rule in throttles_used if rule.lease_seconds is not None]
    return max(from_rules, default=DEFAULT_LEASE_SECONDS)


def _default(value: int | None, fallback: int) -> int:
    return fallback if value is None else value
