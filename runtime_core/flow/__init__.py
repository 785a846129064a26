"""Flow control: run priorities, per-key concurrency and time-window rate limits.

Owns what a user declares to shape when runs start (a submit's priority, a pipeline's
concurrency key, tenant / pipeline / provider-key rate limits), its validation, and the typed
wrappers of the scripts that enforce it atomically in Redis. The shared queue applies
priorities, per-key admission and submit rate limits inside its own scripts; this package
never claims or dispatches runs itself. See docs/flow-control.md.
"""

from runtime_core.flow._concurrency_keys import FLOW_KEY_ATTRIBUTE, KeyPlacement, key_value, place_key
from runtime_core.flow._declarations import (
    NO_FLOW,
    ConcurrencyKey,
    ConcurrencyStrategy,
    PipelineFlow,
    ProviderRateLimit,
    ProviderRateLimits,
    TenantRateLimits,
)
from runtime_core.flow._priority import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY, checked_priority
from runtime_core.flow._rate_limits import (
    GcraCell,
    NamedRateLimit,
    RateLimit,
    RateLimitedError,
    retry_after_ms,
)
from runtime_core.flow._step_limits import StepRateLimiter, StepRateRefusal
from runtime_core.flow._submit_limits import cells_json, dispatch_cells, submit_cells, submit_refused

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Priorities
    "DEFAULT_PRIORITY",
    "MIN_PRIORITY",
    "MAX_PRIORITY",
    "checked_priority",
    # Declarations
    "PipelineFlow",
    "NO_FLOW",
    "ConcurrencyKey",
    "ConcurrencyStrategy",
    "TenantRateLimits",
    "ProviderRateLimits",
    "ProviderRateLimit",
    # Per-key concurrency
    "KeyPlacement",
    "place_key",
    "key_value",
    "FLOW_KEY_ATTRIBUTE",
    # Rate limits
    "RateLimit",
    "NamedRateLimit",
    "GcraCell",
    "RateLimitedError",
    "retry_after_ms",
    "submit_cells",
    "dispatch_cells",
    "submit_refused",
    "cells_json",
    "StepRateLimiter",
    "StepRateRefusal",
]
