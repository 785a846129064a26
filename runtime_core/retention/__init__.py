"""Payload externalization, the layered rehydration resolver, and adaptive retention.

Owns the engine's externalizing ResultCodec (results above a size threshold become durable
payloads with only a reference in Redis), the resolver (Redis value -> in-process LRU ->
archived step -> payload, sha256-checked), the Retention-kind policies of Policy Engine V2
and the retention pass (`lua/compact_results.lua`) that compacts or evicts Completed
results after archiving them. Must not change step statuses: only result values move.
"""

from runtime_core.retention._archive import StepArchiver
from runtime_core.retention._cache import DEFAULT_CACHE_BYTES, DEFAULT_CACHE_ENTRIES, PayloadCache
from runtime_core.retention._codec import (
    DEFAULT_THRESHOLD_BYTES,
    RESOLVER_FAILURE_CODE,
    ExternalizationSettings,
    ExternalizingResultCodec,
)
from runtime_core.retention._compaction import (
    RETENTION_WATERMARK,
    CompactionOutcome,
    CompactionReport,
    ResultCompactor,
    result_readers,
)
from runtime_core.retention._config import DEFAULT_COMPACT_MIN_BYTES, DEFAULT_TRIGGERS, RetentionConfig
from runtime_core.retention._engine import RetentionDecision, RetentionEngine, RetentionStats
from runtime_core.retention._metrics import NullRetentionMetrics, RetentionMetrics
from runtime_core.retention._observer import RetentionObserver
from runtime_core.retention._policies import (
    COMPACT_POLICY,
    EVICT_POLICY,
    HYBRID_POLICY,
    RetentionPolicy,
    RetentionPolicyConfig,
    RetentionStrategy,
    RetentionTriggers,
    register_retention_policies,
)
from runtime_core.retention._refs import (
    NO_TENANT,
    REF_MARKER,
    hot_ref,
    parse_hot_ref,
    payload_id_for,
    result_body,
    tenant_of,
)
from runtime_core.retention._resolver import PayloadResolver, ResolverError, ResolverLayer

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Externalization
    "ExternalizingResultCodec",
    "ExternalizationSettings",
    "DEFAULT_THRESHOLD_BYTES",
    "RESOLVER_FAILURE_CODE",
    "StepArchiver",
    # References
    "REF_MARKER",
    "NO_TENANT",
    "hot_ref",
    "parse_hot_ref",
    "payload_id_for",
    "result_body",
    "tenant_of",
    # Resolver
    "PayloadResolver",
    "PayloadCache",
    "ResolverError",
    "ResolverLayer",
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_CACHE_ENTRIES",
    # Retention policies and decisions
    "COMPACT_POLICY",
    "EVICT_POLICY",
    "HYBRID_POLICY",
    "RetentionPolicy",
    "RetentionPolicyConfig",
    "RetentionStrategy",
    "RetentionTriggers",
    "register_retention_policies",
    "RetentionConfig",
    "DEFAULT_TRIGGERS",
    "DEFAULT_COMPACT_MIN_BYTES",
    "RetentionEngine",
    "RetentionDecision",
    "RetentionStats",
    # Retention pass
    "ResultCompactor",
    "CompactionOutcome",
    "CompactionReport",
    "RETENTION_WATERMARK",
    "result_readers",
    "RetentionObserver",
    # Metrics hook
    "RetentionMetrics",
    "NullRetentionMetrics",
]
