"""Policy Engine V2: one policy model for retry, retention and concurrency.

Owns policy definitions (legacy strings and structured `{name, kind, config}` objects), the
registry keyed by (kind, name), deterministic jitter, and the retry engine with its
built-in retry policies. Must not mutate execution state: engines return decisions, the DAG
store applies them.
"""

from runtime_core.policy._defaults import default_policy_registry
from runtime_core.policy._definition import (
    PolicyDefinition,
    PolicyKind,
    PolicyList,
    parse_policy_definitions,
)
from runtime_core.policy._jitter import jittered_delay_ms, seeded_unit_interval
from runtime_core.policy._registry import Policy, PolicyRegistry, UnknownPolicyError
from runtime_core.policy._retry_config import PROVIDER_RETRY, RetryConfig, RetryStrategy
from runtime_core.policy._retry_engine import (
    COST_LIMIT,
    LIMIT_FAILURE_CODES,
    NON_RETRYABLE_FAILURE_CODES,
    NOT_FOUND_FAILURE_CODE,
    PERMANENT_FAILURE_CODE,
    PERMISSION_DENIED_FAILURE_CODE,
    TIME_LIMIT,
    TOKEN_LIMIT,
    TURN_LIMIT,
    UNAUTHENTICATED_FAILURE_CODE,
    UNCERTAIN_FAILURE_CODE,
    RetryDecision,
    RetryEngine,
)
from runtime_core.policy._retry_policies import (
    TIMEOUT_POLICY,
    TRANSIENT_POLICY,
    CodeRetryPolicy,
    RetryPolicy,
    RetryPolicyOutcome,
)

__all__ = [
    "COST_LIMIT",
    "LIMIT_FAILURE_CODES",
    "NON_RETRYABLE_FAILURE_CODES",
    "NOT_FOUND_FAILURE_CODE",
    "PERMANENT_FAILURE_CODE",
    "PERMISSION_DENIED_FAILURE_CODE",
    "PROVIDER_RETRY",
    "TIMEOUT_POLICY",
    "TIME_LIMIT",
    "TOKEN_LIMIT",
    "TRANSIENT_POLICY",
    "TURN_LIMIT",
    "UNAUTHENTICATED_FAILURE_CODE",
    "UNCERTAIN_FAILURE_CODE",
    "CodeRetryPolicy",
    "Policy",
    "PolicyDefinition",
    "PolicyKind",
    "PolicyList",
    "PolicyRegistry",
    "RetryConfig",
    "RetryDecision",
    "RetryEngine",
    "RetryPolicy",
    "RetryPolicyOutcome",
    "RetryStrategy",
    "UnknownPolicyError",
    "default_policy_registry",
    "jittered_delay_ms",
    "parse_policy_definitions",
    "seeded_unit_interval",
]
