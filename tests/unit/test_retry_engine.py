"""Retry engine: config.retry + retry policies -> deterministic RetryDecision."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy import (
    NON_RETRYABLE_FAILURE_CODES,
    RetryConfig,
    RetryEngine,
    RetryStrategy,
    UnknownPolicyError,
    jittered_delay_ms,
)

ENGINE = RetryEngine()


def _config(**retry: Any) -> dict[str, Any]:
    return {"retry": retry}


def test_step_without_retry_section_is_never_retried() -> None:
    decision = ENGINE.decide({}, "transient", 0, "exec_1:a:0")

    assert decision.retry is False
    assert "maxRetries=0" in decision.reason


def test_retry_section_defaults() -> None:
    assert RetryConfig.from_step_config({}) == RetryConfig(
        policies=[], max_retries=0, strategy=RetryStrategy.FIXED, jitter=False
    )


def test_transient_policy_retries_transient_failure() -> None:
    decision = ENGINE.decide(
        _config(policies=["retry.transient.default"], maxRetries=2, baseDelayMs=500), "transient", 0, "s"
    )

    assert (decision.retry, decision.delay_ms) == (True, 500)
    assert "retry.transient.default" in decision.reason


def test_transient_policy_does_not_retry_other_codes() -> None:
    decision = ENGINE.decide(_config(policies=["retry.transient.default"], maxRetries=2), "timeout", 0, "s")

    assert decision.retry is False
    assert "No retry policy matched failure code 'timeout'" in decision.reason


def test_timeout_policy_defaults_to_timeout_code() -> None:
    decision = ENGINE.decide(_config(policies=["retry.timeout.default"], maxRetries=1), "timeout", 0, "s")

    assert decision.retry is True


def test_timeout_policy_retries_the_code_its_config_names() -> None:
    config = _config(
        policies=[{"name": "retry.timeout.default", "kind": "Retry", "config": {"code": "deadline"}}],
        maxRetries=1,
    )

    assert ENGINE.decide(config, "deadline", 0, "s").retry is True
    assert ENGINE.decide(config, "timeout", 0, "s").retry is False


def test_seed_example_retries_both_transient_and_timeout() -> None:
    config = _config(
        policies=[
            "retry.transient.default",
            {"name": "retry.timeout.default", "kind": "Retry", "config": {"code": "timeout"}},
        ],
        maxRetries=2,
        baseDelayMs=500,
        jitter=False,
    )

    assert [ENGINE.decide(config, code, 0, "s").retry for code in ("transient", "timeout", "bad")] == [
        True,
        True,
        False,
    ]


def test_retries_are_exhausted_when_retry_count_reaches_max_retries() -> None:
    config = _config(policies=["retry.transient.default"], maxRetries=2)

    assert [ENGINE.decide(config, "transient", used, "s").retry for used in (0, 1, 2, 3)] == [
        True,
        True,
        False,
        False,
    ]
    assert "2 of 2 used" in ENGINE.decide(config, "transient", 2, "s").reason


def test_without_policies_any_transient_code_is_retried() -> None:
    config = _config(maxRetries=1)

    assert ENGINE.decide(config, "boom", 0, "s").retry is True
    assert ENGINE.decide(config, "timeout", 0, "s").retry is True
    assert ENGINE.decide(config, "transient", 0, "s").retry is True


@pytest.mark.parametrize("code", sorted(NON_RETRYABLE_FAILURE_CODES))
def test_non_transient_codes_are_never_retried_without_policies(code: str) -> None:
    decision = ENGINE.decide(_config(maxRetries=3), code, 0, "s")

    assert decision.retry is False
    assert f"'{code}' is not transient" in decision.reason


def test_the_non_retryable_codes_are_permanent_not_found_uncertain_refused_credentials_and_agent_limits() -> (
    None
):
    assert NON_RETRYABLE_FAILURE_CODES == {
        "permanent",
        "not_found",
        "uncertain",
        "unauthenticated",
        "permission_denied",
        "turn_limit",
        "token_limit",
        "cost_limit",
        "time_limit",
    }


def test_a_policy_naming_not_found_still_retries_it() -> None:
    config = _config(
        policies=[{"name": "retry.transient.default", "config": {"code": "not_found"}}], maxRetries=2
    )

    assert ENGINE.decide(config, "not_found", 0, "s").retry is True
    assert ENGINE.decide(config, "not_found", 2, "s").retry is False


def test_policy_config_max_retries_overrides_section_max_retries() -> None:
    config = _config(
        policies=[{"name": "retry.transient.default", "kind": "Retry", "config": {"maxRetries": 5}}],
        maxRetries=1,
    )

    assert ENGINE.decide(config, "transient", 4, "s").retry is True
    assert ENGINE.decide(config, "transient", 5, "s").retry is False


def test_fixed_strategy_waits_base_delay_every_retry() -> None:
    config = _config(maxRetries=3, strategy="Fixed", baseDelayMs=500)

    assert [ENGINE.decide(config, "transient", used, "s").delay_ms for used in (0, 1, 2)] == [500, 500, 500]


def test_exponential_strategy_doubles_delay_up_to_max_delay() -> None:
    config = _config(maxRetries=6, strategy="Exponential", baseDelayMs=100, maxDelayMs=1000)

    delays = [ENGINE.decide(config, "transient", used, "s").delay_ms for used in range(6)]

    assert delays == [100, 200, 400, 800, 1000, 1000]


def test_strategy_name_is_case_insensitive() -> None:
    assert RetryConfig.from_step_config(_config(strategy="exponential")).strategy is RetryStrategy.EXPONENTIAL


def test_jitter_gives_the_same_delay_for_the_same_seed() -> None:
    config = _config(maxRetries=2, baseDelayMs=1000, jitter=True)

    first = ENGINE.decide(config, "transient", 0, "exec_1:summarize:0")
    again = ENGINE.decide(config, "transient", 0, "exec_1:summarize:0")

    assert first == again


def test_jitter_spreads_delays_across_seeds() -> None:
    config = _config(maxRetries=2, baseDelayMs=1000, jitter=True)

    delays = {ENGINE.decide(config, "transient", 0, f"exec_{n}:summarize:0").delay_ms for n in range(20)}

    assert len(delays) > 1


@given(delay_ms=st.integers(min_value=0, max_value=10**9), seed=st.text())
def test_jittered_delay_stays_between_half_and_full_delay(delay_ms: int, seed: str) -> None:
    assert (delay_ms + 1) // 2 <= jittered_delay_ms(delay_ms, seed) <= delay_ms


def test_unknown_retry_policy_raises_unknown_policy_error() -> None:
    with pytest.raises(UnknownPolicyError) as caught:
        ENGINE.decide(_config(policies=["retry.flaky.custom"], maxRetries=1), "transient", 0, "s")

    assert caught.value.name == "retry.flaky.custom"


@pytest.mark.parametrize(
    "retry",
    [{"strategy": "Linear"}, {"maxRetries": -1}, {"maxRetry": 2}, {"policies": "retry.transient.default"}],
)
def test_invalid_retry_section_raises_invalid_pipeline_error(retry: dict[str, Any]) -> None:
    with pytest.raises(InvalidPipelineError) as caught:
        ENGINE.decide({"retry": retry}, "transient", 0, "s")

    assert caught.value.rule in {"retry_config", "policy_definition"}


def test_validate_rejects_invalid_retry_policy_config() -> None:
    config = _config(policies=[{"name": "retry.timeout.default", "config": {"codes": ["timeout"]}}])

    with pytest.raises(InvalidPipelineError) as caught:
        ENGINE.validate(config)

    assert caught.value.rule == "retry_policy_config"


# A provider's Retry-After is a floor: backoff and jitter may only push the retry later


def test_retry_after_above_the_backoff_becomes_the_delay() -> None:
    config = _config(maxRetries=2, baseDelayMs=100, jitter=True)
    decision = ENGINE.decide(config, "transient", 0, "exec_1:a:0", retry_after_ms=5_000)
    assert (decision.retry, decision.delay_ms) == (True, 5_000)
    assert "Retry-After" in decision.reason


def test_a_backoff_longer_than_retry_after_is_kept() -> None:
    config = _config(maxRetries=5, baseDelayMs=4_000, strategy="Exponential")
    decision = ENGINE.decide(config, "transient", 2, "exec_1:a:2", retry_after_ms=1_000)
    assert decision.delay_ms == 16_000


@given(
    base=st.integers(min_value=0, max_value=60_000),
    retry_after=st.integers(min_value=0, max_value=120_000),
    count=st.integers(min_value=0, max_value=9),
    jitter=st.booleans(),
)
def test_the_delay_is_never_shorter_than_retry_after_up_to_the_maximum_delay(
    base: int, retry_after: int, count: int, jitter: bool
) -> None:
    config = _config(
        maxRetries=10, baseDelayMs=base, strategy="Exponential", jitter=jitter, maxDelayMs=30_000
    )
    decision = ENGINE.decide(config, "transient", count, f"s:{count}", retry_after_ms=retry_after)
    assert decision.retry and decision.delay_ms >= min(retry_after, 30_000)
    assert decision.delay_ms <= 30_000


def test_a_retry_after_beyond_the_maximum_delay_is_capped_and_the_reason_says_so() -> None:
    config = _config(maxRetries=2, baseDelayMs=100, maxDelayMs=2_000)
    decision = ENGINE.decide(config, "transient", 0, "exec_1:a:0", retry_after_ms=3_600_000)
    assert (decision.retry, decision.delay_ms) == (True, 2_000)
    assert "Retry-After, capped at maxDelayMs=2000" in decision.reason


def test_retry_after_does_not_make_a_permanent_failure_retryable() -> None:
    decision = ENGINE.decide(_config(maxRetries=3), "permanent", 0, "s", retry_after_ms=1_000)
    assert decision.retry is False
