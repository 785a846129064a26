"""The concurrency engine: `config.concurrency` resolution, throttling, admission, leases.

Owns the pipeline+step `config.concurrency` merge, the runtime `ConcurrencyContext`,
generic `concurrency.throttle` rules (which only fill limits not set directly), the
provider/model/operation admission policies, the Redis ZSET lease gate
(`lua/lease_acquire.lua`, `lua/lease_release.lua`) and the local `maxDegreeOfParallelism`
limit of one execution. Must not claim DAG steps: callers
acquire a lease, claim, execute, and release.
"""

from runtime_core.concurrency._admission import AdmissionDenial, evaluate_admission
from runtime_core.concurrency._admission_rules import (
    AdmissionRule,
    ModelAdmissionRule,
    OperationAdmissionRule,
    ProviderAdmissionRule,
)
from runtime_core.concurrency._context import ConcurrencyContext, pipeline_key_of
from runtime_core.concurrency._definition import (
    ConcurrencyDefinition,
    ConcurrencyScope,
    merge_concurrency_definitions,
    parse_concurrency_definition,
)
from runtime_core.concurrency._gate import CONCURRENCY_HASH_TAG, ConcurrencyGate, LeaseDenial, LeaseGrant
from runtime_core.concurrency._leases import LeaseReleaseStatus
from runtime_core.concurrency._parallelism import parallelism_limit
from runtime_core.concurrency._policies import (
    MODEL_ADMISSION_POLICY,
    OPERATION_ADMISSION_POLICY,
    PROVIDER_ADMISSION_POLICY,
    THROTTLE_POLICY,
    ConcurrencyPolicy,
    register_concurrency_policies,
)
from runtime_core.concurrency._resolution import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RETRY_AFTER_MS,
    AdmissionCheck,
    EffectiveConcurrency,
    ScopeLimit,
    resolve_effective_concurrency,
)
from runtime_core.concurrency._throttle import ThrottleRule, ThrottleScope

__all__ = [
    "CONCURRENCY_HASH_TAG",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_RETRY_AFTER_MS",
    "MODEL_ADMISSION_POLICY",
    "OPERATION_ADMISSION_POLICY",
    "PROVIDER_ADMISSION_POLICY",
    "THROTTLE_POLICY",
    "AdmissionCheck",
    "AdmissionDenial",
    "AdmissionRule",
    "ConcurrencyContext",
    "ConcurrencyDefinition",
    "ConcurrencyGate",
    "ConcurrencyPolicy",
    "ConcurrencyScope",
    "EffectiveConcurrency",
    "LeaseDenial",
    "LeaseGrant",
    "LeaseReleaseStatus",
    "ModelAdmissionRule",
    "OperationAdmissionRule",
    "ProviderAdmissionRule",
    "ScopeLimit",
    "ThrottleRule",
    "ThrottleScope",
    "evaluate_admission",
    "merge_concurrency_definitions",
    "parallelism_limit",
    "parse_concurrency_definition",
    "pipeline_key_of",
    "register_concurrency_policies",
    "resolve_effective_concurrency",
]
