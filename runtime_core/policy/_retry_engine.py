"""The retry engine: turns a step failure into a deterministic retry decision.

Owns `RetryEngine` and `RetryDecision`: resolve `config.retry`, run the configured Retry
policies through the registry, aggregate their outcomes, enforce the attempt limit and
compute the delay, and the default classification used when no Retry policy is configured
(`NON_RETRYABLE_FAILURE_CODES`). Must not mutate step state: the DAG store applies the decision.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime_core.policy._defaults import default_policy_registry
from runtime_core.policy._definition import PolicyDefinition, PolicyKind
from runtime_core.policy._jitter import jittered_delay_ms
from runtime_core.policy._registry import PolicyRegistry
from runtime_core.policy._retry_config import RetryConfig, RetryStrategy
from runtime_core.policy._retry_policies import RetryPolicy, RetryPolicyOutcome

PERMANENT_FAILURE_CODE = "permanent"
NOT_FOUND_FAILURE_CODE = "not_found"
# A step refused a second call to a peer that may have acted already (runtime_core.steps.operations).
UNCERTAIN_FAILURE_CODE = "uncertain"
# An agent step went past one of its limits (runtime_core.agents): a retry would only replay to it.
TURN_LIMIT, TOKEN_LIMIT, COST_LIMIT, TIME_LIMIT = "turn_limit", "token_limit", "cost_limit", "time_limit"
LIMIT_FAILURE_CODES = frozenset({TURN_LIMIT, TOKEN_LIMIT, COST_LIMIT, TIME_LIMIT})
# A provider refused the credentials it was sent (HTTP 401) or what they may do (HTTP 403).
UNAUTHENTICATED_FAILURE_CODE, PERMISSION_DENIED_FAILURE_CODE = "unauthenticated", "permission_denied"
# Without Retry policies every other code counts as transient. These never are: trying again
# cannot change the answer (or, for `uncertain`, could repeat a side effect). A policy naming
# one of them explicitly still retries it.
NON_RETRYABLE_FAILURE_CODES = frozenset(
    {
        PERMANENT_FAILURE_CODE,
        NOT_FOUND_FAILURE_CODE,
        UNCERTAIN_FAILURE_CODE,
        UNAUTHENTICATED_FAILURE_CODE,
        PERMISSION_DENIED_FAILURE_CODE,
        *LIMIT_FAILURE_CODES,
    }
)
_MAX_DOUBLINGS = 62


class RetryDecision(BaseModel):
    """Retry or not, after how long, and a human-readable reason for ledger and trace.

    `exhausted`: not retried only because every allowed retry was used.
    """

    model_config = ConfigDict(frozen=True)

    retry: bool
    delay_ms: int = 0
    reason: str
    exhausted: bool = False


class _Eligibility(BaseModel):
    """Who allowed the retry and under which attempt limit."""

    source: str
    max_retries: int


class RetryEngine:
    """Stateless and deterministic: the same inputs always give the same decision."""

    def __init__(self, registry: PolicyRegistry | None = None) -> None:
        self._registry = registry or default_policy_registry()

    def validate(self, step_config: dict[str, Any] | None) -> RetryConfig:
        """Parse `config.retry` and check every policy name and policy config; raise typed."""
        retry = RetryConfig.from_step_config(step_config)
        for policy, definition in self._resolve_policies(retry):
            policy.validate_config(definition.config)
        return retry

    def decide(
        self,
        config: dict[str, Any] | None,
        failure_code: str,
        retry_count: int,
        seed: str,
        *,
        retry_after_ms: int | None = None,
    ) -> RetryDecision:
        """Decide for a step `config` whose failure has `failure_code`.

        `retry_count` is the number of retries already used; `seed` (conventionally
        `execution_id:step:retry_count`) fixes the jitter. `retry_after_ms` (a provider's
        `Retry-After`) is a floor, capped at the section's `maxDelayMs`: the delay is never
        shorter than it, whatever backoff and jitter say, and a provider asking for an hour
        cannot park the step longer than the policy allows.
        """
        retry = RetryConfig.from_step_config(config)
        eligibility = self._eligibility(retry, failure_code)
        if isinstance(eligibility, RetryDecision):
            return eligibility
        if eligibility.max_retries == 0:
            return RetryDecision(
                retry=False,
                reason=f"Retry is not configured for failure code '{failure_code}' (maxRetries=0).",
            )
        if retry_count >= eligibility.max_retries:
            return RetryDecision(
                retry=False,
                exhausted=True,
                reason=f"Retries exhausted for failure code '{failure_code}': "
                f"{retry_count} of {eligibility.max_retries} used.",
            )
        delay_ms = self._delay_ms(retry, retry_count, seed)
        floor = ""
        if retry_after_ms is not None:
            capped = min(retry_after_ms, retry.max_delay_ms)
            if capped > delay_ms:
                cap = f", capped at maxDelayMs={retry.max_delay_ms}" if capped < retry_after_ms else ""
                delay_ms, floor = capped, f" (the provider's Retry-After{cap})"
        return RetryDecision(
            retry=True,
            delay_ms=delay_ms,
            reason=f"Retry {retry_count + 1} of {eligibility.max_retries} for failure code "
            f"'{failure_code}' allowed by {eligibility.source}; next attempt in {delay_ms} ms{floor}.",
        )

    def _eligibility(self, retry: RetryConfig, failure_code: str) -> _Eligibility | RetryDecision:
        if not retry.policies:
            if failure_code in NON_RETRYABLE_FAILURE_CODES:
                return RetryDecision(
                    retry=False,
                    reason=f"Failure code '{failure_code}' is not transient: it is retried only "
                    "when a retry policy names it.",
                )
            return _Eligibility(source="config.retry", max_retries=retry.max_retries)
        outcomes = self._evaluate_policies(retry, failure_code)
        matched = next((outcome for outcome in outcomes if outcome.matched), None)
        if matched is None:
            names = ", ".join(outcome.policy for outcome in outcomes)
            return RetryDecision(
                retry=False,
                reason=f"No retry policy matched failure code '{failure_code}' (policies: {names}).",
            )
        limit = retry.max_retries if matched.max_retries is None else matched.max_retries
        return _Eligibility(source=f"policy '{matched.policy}'", max_retries=limit)

    def _evaluate_policies(self, retry: RetryConfig, failure_code: str) -> list[RetryPolicyOutcome]:
        return [
            policy.evaluate(definition.config, failure_code)
            for policy, definition in self._resolve_policies(retry)
        ]

    def _resolve_policies(self, retry: RetryConfig) -> list[tuple[RetryPolicy, PolicyDefinition]]:
        return self._registry.resolve_all(PolicyKind.RETRY, retry.policies, RetryPolicy)

    @staticmethod
    def _delay_ms(retry: RetryConfig, retry_count: int, seed: str) -> int:
        delay_ms = retry.base_delay_ms
        if retry.strategy is RetryStrategy.EXPONENTIAL:
            delay_ms = retry.base_delay_ms * 2 ** min(retry_count, _MAX_DOUBLINGS)
        delay_ms = min(delay_ms, retry.max_delay_ms)
        return jittered_delay_ms(delay_ms, seed) if retry.jitter else delay_ms
