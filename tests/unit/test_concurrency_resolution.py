"""config.concurrency resolution: merge, context, throttle rules and admission (pure, no Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core.concurrency import (
    AdmissionDenial,
    ConcurrencyContext,
    ConcurrencyScope,
    EffectiveConcurrency,
    evaluate_admission,
    resolve_effective_concurrency,
)
from runtime_core.errors import InvalidPipelineError
from runtime_core.policy import UnknownPolicyError

SUMMARIZE_CONFIG = {"provider": "openai", "model": "gpt-4.1", "operation": "llm.chat"}


def _context(step_config: dict[str, Any] | None = None, **overrides: Any) -> ConcurrencyContext:
    fields = {
        "pipeline_name": "content-generation",
        "pipeline_version": "1",
        "step_name": "summarize",
        "step_key": "llm.summary",
        "step_config": SUMMARIZE_CONFIG if step_config is None else step_config,
        "execution_id": "exec_1",
        "runtime_instance_id": "rt_1",
    }
    return ConcurrencyContext.for_step(**{**fields, **overrides})


def _concurrency(**section: Any) -> dict[str, Any]:
    return {"concurrency": section}


def _throttle(**config: Any) -> dict[str, Any]:
    return {"name": "concurrency.throttle", "config": config}


def _resolve(
    pipeline: dict[str, Any] | None, step_config: dict[str, Any] | None = None, **context: Any
) -> EffectiveConcurrency:
    step = SUMMARIZE_CONFIG if step_config is None else step_config
    return resolve_effective_concurrency(pipeline, step, _context(step, **context))


def _limits(effective: EffectiveConcurrency) -> dict[str, int]:
    return {scope.key_suffix: scope.limit for scope in effective.scopes}


def _denial(effective: EffectiveConcurrency) -> AdmissionDenial:
    denial = evaluate_admission(effective)
    assert denial is not None
    return denial


def test_step_without_concurrency_config_needs_no_lease() -> None:
    effective = _resolve({})

    assert (effective.enabled, effective.scopes, effective.requires_lease) == (False, (), False)


def test_context_takes_provider_model_and_operation_from_step_config() -> None:
    context = _context()

    assert (context.pipeline_key, context.provider, context.model, context.operation) == (
        "content-generation:1",
        "openai",
        "gpt-4.1",
        "llm.chat",
    )


def test_non_string_provider_raises_invalid_pipeline_error() -> None:
    with pytest.raises(InvalidPipelineError):
        _context({"provider": 7})


def test_direct_limits_map_to_the_seed_scope_key_layout() -> None:
    effective = _resolve(
        _concurrency(
            enabled=True,
            maxDegreeOfParallelism=8,
            maxGlobalConcurrency=100,
            maxPipelineConcurrency=20,
            maxStepConcurrency=5,
            maxExecutionConcurrency=10,
            maxInstanceConcurrency=8,
            maxProviderConcurrency=25,
            maxModelConcurrency=10,
            maxOperationConcurrency=15,
            leaseSeconds=300,
            defaultRetryAfterMs=250,
            jitter=False,
        )
    )

    assert _limits(effective) == {
        "global": 100,
        "pipeline:content-generation:1": 20,
        "pipeline-step:content-generation:1:llm.summary": 5,
        "execution:exec_1": 10,
        "instance:rt_1": 8,
        "provider:openai": 25,
        "model:openai:gpt-4.1": 10,
        "operation:llm.chat": 15,
    }
    assert (effective.max_degree_of_parallelism, effective.lease_ms, effective.default_retry_after_ms) == (
        8,
        300_000,
        250,
    )


def test_scopes_without_a_context_value_are_skipped() -> None:
    effective = _resolve(
        _concurrency(maxProviderConcurrency=2, maxModelConcurrency=2, maxExecutionConcurrency=2),
        step_config={"operation": "rag.retrieve"},
        execution_id=None,
    )

    assert effective.scopes == ()


def test_section_without_enabled_flag_is_enabled() -> None:
    assert _resolve(_concurrency(maxProviderConcurrency=2)).requires_lease is True


def test_step_level_values_override_pipeline_level_values() -> None:
    step_config = {**SUMMARIZE_CONFIG, **_concurrency(maxProviderConcurrency=2, leaseSeconds=30)}

    effective = _resolve(
        _concurrency(maxProviderConcurrency=25, maxGlobalConcurrency=100, leaseSeconds=300), step_config
    )

    assert _limits(effective) == {"global": 100, "provider:openai": 2}
    assert effective.lease_ms == 30_000


def test_step_can_disable_pipeline_level_concurrency() -> None:
    step_config = {**SUMMARIZE_CONFIG, **_concurrency(enabled=False)}

    effective = _resolve(_concurrency(enabled=True, maxProviderConcurrency=2), step_config)

    assert (effective.enabled, effective.requires_lease) == (False, False)


def test_policies_from_pipeline_and_step_both_apply() -> None:
    step_config = {
        **SUMMARIZE_CONFIG,
        **_concurrency(policies=[_throttle(scope="operation", target="llm.chat", limit=3)]),
    }

    effective = _resolve(
        _concurrency(enabled=True, policies=[_throttle(scope="provider", target="openai", limit=10)]),
        step_config,
    )

    assert _limits(effective) == {"provider:openai": 10, "operation:llm.chat": 3}


def test_throttle_rule_fills_missing_provider_limit() -> None:
    effective = _resolve(
        _concurrency(
            enabled=True,
            policies=[_throttle(scope="provider", target="openai", limit=10, defaultRetryAfterMs=400)],
        )
    )

    [scope] = effective.scopes
    assert (scope.scope, scope.key_suffix, scope.limit, scope.retry_after_ms) == (
        ConcurrencyScope.PROVIDER,
        "provider:openai",
        10,
        400,
    )


def test_direct_limit_stays_authoritative_over_throttle_rule() -> None:
    effective = _resolve(
        _concurrency(
            maxProviderConcurrency=2, policies=[_throttle(scope="provider", target="openai", limit=10)]
        )
    )

    assert _limits(effective) == {"provider:openai": 2}


def test_throttle_without_target_applies_to_every_provider() -> None:
    pipeline = _concurrency(policies=[_throttle(scope="provider", limit=4)])

    openai = _resolve(pipeline)
    vector = _resolve(pipeline, step_config={"provider": "redis-vector"})

    assert (_limits(openai), _limits(vector)) == ({"provider:openai": 4}, {"provider:redis-vector": 4})


def test_throttle_for_another_provider_does_not_apply() -> None:
    effective = _resolve(
        _concurrency(policies=[_throttle(scope="provider", target="openai", limit=10)]),
        step_config={"provider": "redis-vector", "operation": "rag.retrieve"},
    )

    assert effective.scopes == ()


def test_model_throttle_matches_the_provider_model_pair() -> None:
    pipeline = _concurrency(policies=[_throttle(scope="model", target="openai:gpt-4.1", limit=5)])

    matching = _resolve(pipeline)
    other_provider = _resolve(pipeline, step_config={"provider": "azure", "model": "gpt-4.1"})

    assert (_limits(matching), _limits(other_provider)) == ({"model:openai:gpt-4.1": 5}, {})


def test_step_throttle_matches_step_name_and_fills_pipeline_step_scope() -> None:
    effective = _resolve(_concurrency(policies=[_throttle(scope="step", target="summarize", limit=1)]))

    assert _limits(effective) == {"pipeline-step:content-generation:1:llm.summary": 1}


def test_step_type_throttle_matches_step_key() -> None:
    pipeline = _concurrency(policies=[_throttle(scope="step-type", target="llm.summary", limit=3)])

    matching = _resolve(pipeline)
    other_key = _resolve(pipeline, step_key="rag.retrieve")

    assert (_limits(matching), _limits(other_key)) == (
        {"pipeline-step:content-generation:1:llm.summary": 3},
        {},
    )


def test_pipeline_throttle_matches_pipeline_key() -> None:
    pipeline = _concurrency(policies=[_throttle(scope="pipeline", target="content-generation:1", limit=20)])

    assert _limits(_resolve(pipeline)) == {"pipeline:content-generation:1": 20}
    assert _limits(_resolve(pipeline, pipeline_version="2")) == {}


def test_tightest_matching_throttle_rule_wins() -> None:
    pipeline = _concurrency(
        policies=[_throttle(scope="provider", limit=8), _throttle(scope="provider", target="openai", limit=3)]
    )

    assert _limits(_resolve(pipeline)) == {"provider:openai": 3}


def test_throttle_lease_seconds_applies_when_section_sets_none() -> None:
    pipeline = _concurrency(policies=[_throttle(scope="provider", limit=8, leaseSeconds=42)])

    assert _resolve(pipeline).lease_ms == 42_000


def test_provider_admission_blocks_unlisted_provider_with_seed_text() -> None:
    pipeline = _concurrency(
        policies=[
            {
                "name": "concurrency.provider.admission",
                "config": {"allowedProviders": ["anthropic"], "requireProvider": True, "retryAfterMs": 500},
            }
        ]
    )

    denial = _denial(_resolve(pipeline))

    assert (denial.reason, denial.retry_after_ms, denial.policy) == (
        "Provider 'openai' is blocked by concurrency policy.",
        500,
        "concurrency.provider.admission",
    )


def test_provider_admission_allows_listed_provider() -> None:
    pipeline = _concurrency(
        policies=[{"name": "concurrency.provider.admission", "config": {"allowedProviders": ["openai"]}}]
    )

    assert evaluate_admission(_resolve(pipeline)) is None


def test_provider_admission_denies_step_without_required_provider() -> None:
    pipeline = _concurrency(
        defaultRetryAfterMs=75,
        policies=[{"name": "concurrency.provider.admission", "config": {"requireProvider": True}}],
    )

    denial = _denial(_resolve(pipeline, step_config={"operation": "llm.chat"}))

    assert (denial.reason, denial.retry_after_ms) == (
        "Step 'summarize' declares no provider, but concurrency policy requires one.",
        75,
    )


def test_model_admission_accepts_provider_model_pair_or_bare_model() -> None:
    def admitted(allowed: list[str]) -> bool:
        pipeline = _concurrency(
            policies=[{"name": "concurrency.model.admission", "config": {"allowedModels": allowed}}]
        )
        return evaluate_admission(_resolve(pipeline)) is None

    assert (admitted(["openai:gpt-4.1"]), admitted(["gpt-4.1"]), admitted(["azure:gpt-4.1"])) == (
        True,
        True,
        False,
    )


def test_model_admission_denial_names_the_provider_model_pair() -> None:
    pipeline = _concurrency(
        policies=[{"name": "concurrency.model.admission", "config": {"allowedModels": ["gpt-4o"]}}]
    )

    assert _denial(_resolve(pipeline)).reason == "Model 'openai:gpt-4.1' is blocked by concurrency policy."


def test_operation_admission_blocks_unlisted_operation() -> None:
    pipeline = _concurrency(
        policies=[
            {"name": "concurrency.operation.admission", "config": {"allowedOperations": ["rag.retrieve"]}}
        ]
    )

    assert _denial(_resolve(pipeline)).reason == "Operation 'llm.chat' is blocked by concurrency policy."


def test_disabled_concurrency_skips_admission() -> None:
    pipeline = _concurrency(
        enabled=False,
        policies=[{"name": "concurrency.provider.admission", "config": {"allowedProviders": []}}],
    )

    assert evaluate_admission(_resolve(pipeline)) is None


def test_unknown_concurrency_policy_raises_unknown_policy_error() -> None:
    with pytest.raises(UnknownPolicyError) as caught:
        _resolve(_concurrency(policies=["concurrency.tenant.admission"]))

    assert caught.value.name == "concurrency.tenant.admission"


@pytest.mark.parametrize(
    "section",
    [
        {"policies": [_throttle(scope="region", limit=1)]},
        {"policies": [_throttle(scope="provider")]},
        {"policies": ["concurrency.throttle"]},
        {"maxProviderConcurency": 2},
        {"maxProviderConcurrency": -1},
    ],
)
def test_invalid_concurrency_section_raises_invalid_pipeline_error(section: dict[str, Any]) -> None:
    with pytest.raises(InvalidPipelineError) as caught:
        _resolve({"concurrency": section})

    assert caught.value.rule in {"concurrency_config", "concurrency_policy_config"}
