"""Which steps of an execution pass the concurrency gate, and what the gate last refused.

Owns `StepGates`: the effective `config.concurrency` of every gated step (resolved once per
execution), the Redis scope keys each one leases, the steps whose provider has a rate-limit
budget (`providers`), and the denial memory that keeps a refused step out of the claim loop
until its retry-after passes (or a local release frees its scope). Also owns
`validate_step_policies`, the create-time check of `config.retry` and `config.concurrency`.
Must not acquire leases or claim steps: the engine does that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime_core.concurrency import (
    ConcurrencyContext,
    EffectiveConcurrency,
    ScopeLimit,
    resolve_effective_concurrency,
)
from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import PipelineDefinition, StepDefinition


def _context(
    pipeline: PipelineDefinition, step: StepDefinition, execution_id: str | None, instance_id: str | None
) -> ConcurrencyContext:
    return ConcurrencyContext.for_step(
        pipeline_name=pipeline.name,
        pipeline_version=pipeline.version,
        step_name=step.name,
        step_key=step.step_key,
        step_config=step.config,
        execution_id=execution_id,
        runtime_instance_id=instance_id,
    )


def validate_step_policies(
    pipeline: PipelineDefinition, validate_retry: Callable[[dict[str, Any]], Any]
) -> None:
    """Every step's `config.retry` and pipeline+step `config.concurrency` must parse and name
    registered policies; the first problem raises InvalidPipelineError (rule `policies_valid`).

    Without a pipeline `config.concurrency`, every step whose config has neither `retry` nor
    `concurrency` is checked the same way with the same outcome (the default retry policies, no
    gate): only the first of them is checked (a 9,000-step fan-out: 60-75 ms less per check)."""
    plain_checked = False
    no_pipeline_concurrency = "concurrency" not in pipeline.config
    for step in pipeline.steps:
        if no_pipeline_concurrency and "retry" not in step.config and "concurrency" not in step.config:
            if plain_checked:
                continue
            plain_checked = True
        try:
            validate_retry(step.config)
            resolve_effective_concurrency(pipeline.config, step.config, _context(pipeline, step, None, None))
        except InvalidPipelineError as exc:
            raise InvalidPipelineError(
                "policies_valid", f"Step '{step.name}': {exc.message}", hint=exc.hint
            ) from exc


@dataclass
class _Denial:
    until_ms: int
    scope_key: str | None  # None = a policy refused it (a released lease does not lift it)


@dataclass
class StepGates:
    """The gated steps of one execution; empty = the batch fast path applies."""

    effective: dict[str, EffectiveConcurrency]
    scope_keys: dict[str, frozenset[str]]
    # Step -> its provider, for steps whose provider's calls take from a rate-limit budget.
    providers: dict[str, str] = field(default_factory=dict)
    denials: dict[str, _Denial] = field(default_factory=dict)
    attempting: set[str] = field(default_factory=set)

    @classmethod
    def resolve(
        cls,
        pipeline: PipelineDefinition,
        execution_id: str,
        instance_id: str,
        scope_key: Callable[[ScopeLimit], str],
        rate_limited: Callable[[str | None], bool] | None = None,
    ) -> StepGates:
        effective: dict[str, EffectiveConcurrency] = {}
        providers: dict[str, str] = {}
        pipeline_gated = "concurrency" in (pipeline.config or {})
        for step in pipeline.steps:
            config = step.config or {}
            if not (pipeline_gated or "concurrency" in config or (rate_limited and config.get("provider"))):
                continue  # nothing gates it (its policies were checked at create): no context to build
            context = _context(pipeline, step, execution_id, instance_id)
            resolved = resolve_effective_concurrency(pipeline.config, step.config, context)
            if resolved.requires_lease or (resolved.enabled and resolved.admission):
                effective[step.name] = resolved
            if rate_limited is not None and context.provider and rate_limited(context.provider):
                providers[step.name] = context.provider
        keys = {
            name: frozenset(scope_key(scope) for scope in resolved.scopes)
            for name, resolved in effective.items()
        }
        return cls(effective, keys, providers)

    @property
    def active(self) -> bool:
        return bool(self.effective or self.providers)

    def open_for(self, step_name: str, now_ms: int) -> bool:
        """No local worker is trying the step and no recent denial holds it back."""
        denial = self.denials.get(step_name)
        return step_name not in self.attempting and (denial is None or denial.until_ms <= now_ms)

    def deny_step(self, step_name: str, until_ms: int) -> None:
        self.denials[step_name] = _Denial(until_ms, None)

    def deny_scope(self, scope_key: str, until_ms: int) -> None:
        """A full scope holds back every step that leases in it, not just the one that asked."""
        for name, keys in self.scope_keys.items():
            if scope_key in keys:
                self.denials[name] = _Denial(until_ms, scope_key)

    def lift_scopes(self, scope_keys: tuple[str, ...]) -> None:
        """Capacity came back locally: steps denied on those scopes may try again at once."""
        released = set(scope_keys)
        for name in [n for n, denial in self.denials.items() if denial.scope_key in released]:
            del self.denials[name]

    def next_retry_ms(self, now_ms: int) -> int | None:
        return min((d.until_ms for d in self.denials.values() if d.until_ms > now_ms), default=None)
