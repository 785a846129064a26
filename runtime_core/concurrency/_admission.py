"""Policy admission: the pure check that runs before any Redis lease is requested.

Owns `AdmissionDenial` and `evaluate_admission`. Must not touch Redis: a denied step takes
no lease and is not claimed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runtime_core.concurrency._resolution import EffectiveConcurrency


class AdmissionDenial(BaseModel):
    """A concurrency policy refused the step; try again after `retry_after_ms`."""

    model_config = ConfigDict(frozen=True)

    reason: str
    retry_after_ms: int
    policy: str


def evaluate_admission(effective: EffectiveConcurrency) -> AdmissionDenial | None:
    """First denying admission rule in declaration order wins; None = admitted."""
    if not effective.enabled:
        return None
    for check in effective.admission:
        reason = check.rule.deny_reason(effective.context)
        if reason is not None:
            retry_after_ms = check.rule.retry_after_ms
            return AdmissionDenial(
                reason=reason,
                retry_after_ms=effective.default_retry_after_ms if retry_after_ms is None else retry_after_ms,
                policy=check.policy,
            )
    return None
