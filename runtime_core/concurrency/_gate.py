"""The Redis concurrency gate: policy admission, then all-or-nothing ZSET leases.

Owns `ConcurrencyGate`, `LeaseGrant`, `LeaseDenial` and the scope key layout
`<prefix>{concurrency:<scope parts>}:scope`: every scope ZSET has its own hash tag, so the
leases of different providers, models, steps and pipelines spread over a Redis Cluster's
slots instead of loading one (a step's leases in several scopes are taken all or nothing,
scope by scope: see `_leases`).
Must not claim DAG steps: the caller claims after a grant and releases if the claim fails.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runtime_core.concurrency._admission import AdmissionDenial, evaluate_admission
from runtime_core.concurrency._leases import (
    LeaseReleaseStatus,
    LeasesAcquired,
    acquire_scope_leases,
    release_scope_leases,
)
from runtime_core.concurrency._resolution import EffectiveConcurrency, ScopeLimit
from runtime_core.hot_state import HotState
from runtime_core.policy import jittered_delay_ms

CONCURRENCY_HASH_TAG = "concurrency"


class LeaseGrant(BaseModel):
    """Capacity held until `release`. No scope keys = nothing was limited (no Redis call)."""

    model_config = ConfigDict(frozen=True)

    lease_id: str
    scope_keys: tuple[str, ...] = ()
    expires_at_ms: int | None = None


class LeaseDenial(BaseModel):
    """A scope was full; nothing was acquired in any scope. Retry after `retry_after_ms`."""

    model_config = ConfigDict(frozen=True)

    reason: str
    retry_after_ms: int
    scope_key: str
    current: int
    limit: int


class ConcurrencyGate:
    """Admission + distributed leases for step execution."""

    def __init__(self, hot_state: HotState) -> None:
        self._hot_state = hot_state

    def scope_key(self, scope: ScopeLimit) -> str:
        """`mcprt:{concurrency:provider:openai}:scope` and so on."""
        return self._hot_state.tagged(":".join((CONCURRENCY_HASH_TAG, *scope.key_parts)), "scope")

    async def try_acquire(
        self, effective: EffectiveConcurrency, lease_id: str
    ) -> LeaseGrant | LeaseDenial | AdmissionDenial:
        """Evaluate admission policies, then take a lease in every limited scope or none.

        An admission denial never reaches Redis; a step with nothing to limit gets a grant
        without a Redis round trip.
        """
        admission_denial = evaluate_admission(effective)
        if admission_denial is not None:
            return admission_denial
        if not effective.requires_lease:
            return LeaseGrant(lease_id=lease_id)
        keys = [self.scope_key(scope) for scope in effective.scopes]
        limits = [scope.limit for scope in effective.scopes]
        result = await acquire_scope_leases(self._hot_state, keys, limits, lease_id, effective.lease_ms)
        if isinstance(result, LeasesAcquired):
            return LeaseGrant(lease_id=lease_id, scope_keys=tuple(keys), expires_at_ms=result.expires_at_ms)
        blocked_key = keys[result.blocked_index]
        return LeaseDenial(
            reason=f"Concurrency limit reached for scope '{blocked_key}'. "
            f"Current='{result.current}', Limit='{result.limit}'.",
            retry_after_ms=self._retry_after_ms(effective, effective.scopes[result.blocked_index], lease_id),
            scope_key=blocked_key,
            current=result.current,
            limit=result.limit,
        )

    async def release(self, grant: LeaseGrant) -> LeaseReleaseStatus:
        """Give the capacity back (idempotent); a no-op grant costs no Redis call."""
        if not grant.scope_keys:
            return LeaseReleaseStatus.RELEASED
        return await release_scope_leases(self._hot_state, grant.scope_keys, grant.lease_id)

    @staticmethod
    def _retry_after_ms(effective: EffectiveConcurrency, scope: ScopeLimit, lease_id: str) -> int:
        if effective.jitter:
            return jittered_delay_ms(scope.retry_after_ms, lease_id)
        return scope.retry_after_ms
