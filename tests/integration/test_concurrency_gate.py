"""The Redis concurrency gate against a real redis-server: ZSET leases, all-or-nothing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from runtime_core.concurrency import (
    AdmissionDenial,
    ConcurrencyContext,
    ConcurrencyGate,
    EffectiveConcurrency,
    LeaseDenial,
    LeaseGrant,
    LeaseReleaseStatus,
    resolve_effective_concurrency,
)
from runtime_core.hot_state import HotState
from tests.reliability.lua_cluster import key_slot

# Every scope is its own slot: a lease in several scopes crosses slots on the cluster.
pytestmark = pytest.mark.redis_kinds("single", "cluster")

OPENAI_STEP = {"provider": "openai", "model": "gpt-4.1", "operation": "llm.chat"}


def _effective(section: dict[str, Any], step_config: dict[str, Any] | None = None) -> EffectiveConcurrency:
    step = OPENAI_STEP if step_config is None else step_config
    context = ConcurrencyContext.for_step(
        pipeline_name="content-generation",
        pipeline_version="1",
        step_name="summarize",
        step_key="llm.summary",
        step_config=step,
        execution_id="exec_1",
        runtime_instance_id="rt_1",
    )
    return resolve_effective_concurrency({"concurrency": section}, step, context)


def _throttle(**config: Any) -> dict[str, Any]:
    return {"name": "concurrency.throttle", "config": config}


async def _keys(hot_state: HotState) -> list[str]:
    return sorted(await hot_state.redis.keys(hot_state.prefix + "*"))


async def _wait_until_lease_expired(hot_state: HotState, key: str, lease_id: str, timeout_s: float) -> None:
    """Poll the lease's ZSET score against Redis TIME (each check is a Redis round trip)."""
    deadline = time.monotonic() + timeout_s
    expires_at_ms = await hot_state.redis.zscore(key, lease_id)
    assert expires_at_ms is not None
    while await hot_state.server_time_ms() <= expires_at_ms:
        assert time.monotonic() < deadline, f"lease {lease_id} did not expire within {timeout_s}s"


async def test_third_acquire_is_denied_at_provider_limit_two(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective({"maxProviderConcurrency": 2, "defaultRetryAfterMs": 120})

    first = await gate.try_acquire(effective, "lease-1")
    second = await gate.try_acquire(effective, "lease-2")
    third = await gate.try_acquire(effective, "lease-3")

    assert isinstance(first, LeaseGrant) and isinstance(second, LeaseGrant)
    assert isinstance(third, LeaseDenial)
    key = f"{hot_state.prefix}{{concurrency:provider:openai}}:scope"
    assert third.reason == f"Concurrency limit reached for scope '{key}'. Current='2', Limit='2'."
    assert (third.scope_key, third.retry_after_ms) == (key, 120)


async def test_full_scope_denies_without_adding_a_lease_in_any_other_scope(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective(
        {"maxGlobalConcurrency": 10, "maxProviderConcurrency": 1, "maxModelConcurrency": 1}
    )
    held = await gate.try_acquire(
        _effective({"maxProviderConcurrency": 1}, step_config={"provider": "openai"}), "holder"
    )
    assert isinstance(held, LeaseGrant)

    denial = await gate.try_acquire(effective, "blocked")

    assert isinstance(denial, LeaseDenial)
    assert denial.scope_key.endswith("{concurrency:provider:openai}:scope")
    for scope in effective.scopes:
        assert await hot_state.redis.zscore(gate.scope_key(scope), "blocked") is None


async def test_concurrent_acquires_never_exceed_the_limit(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective({"maxProviderConcurrency": 3, "maxGlobalConcurrency": 5})

    results = await asyncio.gather(*(gate.try_acquire(effective, f"lease-{n}") for n in range(12)))

    assert sum(isinstance(result, LeaseGrant) for result in results) == 3


async def test_expired_lease_frees_capacity_on_next_acquire(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    short_lease = _effective({"maxProviderConcurrency": 1}).model_copy(update={"lease_ms": 50})
    crashed = await gate.try_acquire(short_lease, "crashed-worker")
    assert isinstance(crashed, LeaseGrant)
    assert isinstance(await gate.try_acquire(short_lease, "waiting"), LeaseDenial)

    await _wait_until_lease_expired(hot_state, crashed.scope_keys[0], "crashed-worker", timeout_s=5)
    retried = await gate.try_acquire(short_lease, "waiting")

    assert isinstance(retried, LeaseGrant)
    assert await hot_state.redis.zrange(crashed.scope_keys[0], 0, -1) == ["waiting"]


async def test_release_frees_capacity(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective({"maxProviderConcurrency": 1, "maxOperationConcurrency": 1})
    grant = await gate.try_acquire(effective, "lease-1")
    assert isinstance(grant, LeaseGrant)

    status = await gate.release(grant)

    assert status is LeaseReleaseStatus.RELEASED
    assert isinstance(await gate.try_acquire(effective, "lease-2"), LeaseGrant)


async def test_releasing_an_expired_lease_reports_expired(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    grant = await gate.try_acquire(_effective({"maxProviderConcurrency": 1}), "lease-1")
    assert isinstance(grant, LeaseGrant)
    await gate.release(grant)

    assert await gate.release(grant) is LeaseReleaseStatus.EXPIRED


async def test_admission_denial_never_touches_redis(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective(
        {
            "maxProviderConcurrency": 5,
            "policies": [
                {
                    "name": "concurrency.provider.admission",
                    "config": {"allowedProviders": ["anthropic"], "retryAfterMs": 500},
                }
            ],
        }
    )

    denial = await gate.try_acquire(effective, "lease-1")

    assert isinstance(denial, AdmissionDenial)
    assert (denial.reason, denial.retry_after_ms) == (
        "Provider 'openai' is blocked by concurrency policy.",
        500,
    )
    assert await _keys(hot_state) == []


async def test_direct_provider_limit_beats_throttle_rule_limit(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective(
        {"maxProviderConcurrency": 1, "policies": [_throttle(scope="provider", target="openai", limit=5)]}
    )

    assert isinstance(await gate.try_acquire(effective, "lease-1"), LeaseGrant)
    denial = await gate.try_acquire(effective, "lease-2")

    assert isinstance(denial, LeaseDenial)
    assert denial.limit == 1


async def test_throttle_without_target_limits_every_provider(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    section = {"policies": [_throttle(scope="provider", limit=1)]}
    openai = _effective(section)
    anthropic = _effective(section, step_config={"provider": "anthropic"})

    assert isinstance(await gate.try_acquire(openai, "openai-1"), LeaseGrant)
    assert isinstance(await gate.try_acquire(anthropic, "anthropic-1"), LeaseGrant)

    openai_denial = await gate.try_acquire(openai, "openai-2")
    anthropic_denial = await gate.try_acquire(anthropic, "anthropic-2")
    assert isinstance(openai_denial, LeaseDenial) and isinstance(anthropic_denial, LeaseDenial)
    assert openai_denial.scope_key.endswith("{concurrency:provider:openai}:scope")
    assert anthropic_denial.scope_key.endswith("{concurrency:provider:anthropic}:scope")


async def test_step_without_limits_gets_a_grant_without_touching_redis(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)

    grant = await gate.try_acquire(_effective({"enabled": False, "maxProviderConcurrency": 1}), "lease-1")

    assert grant == LeaseGrant(lease_id="lease-1")
    assert await gate.release(grant) is LeaseReleaseStatus.RELEASED
    assert await _keys(hot_state) == []


async def test_reacquiring_a_held_lease_id_is_idempotent(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective({"maxProviderConcurrency": 1})
    assert isinstance(await gate.try_acquire(effective, "lease-1"), LeaseGrant)

    again = await gate.try_acquire(effective, "lease-1")

    assert isinstance(again, LeaseGrant)
    assert await hot_state.redis.zcard(again.scope_keys[0]) == 1


async def test_each_scope_key_has_its_own_hash_tag(hot_state: HotState) -> None:
    """Issue 17.2: leases spread over a cluster's slots, one scope per hash tag."""
    gate = ConcurrencyGate(hot_state)
    effective = _effective({"maxGlobalConcurrency": 9, "maxStepConcurrency": 9, "maxModelConcurrency": 9})

    grant = await gate.try_acquire(effective, "lease-1")

    assert isinstance(grant, LeaseGrant)
    assert list(grant.scope_keys) == [
        f"{hot_state.prefix}{{concurrency:global}}:scope",
        f"{hot_state.prefix}{{concurrency:pipeline-step:content-generation:1:llm.summary}}:scope",
        f"{hot_state.prefix}{{concurrency:model:openai:gpt-4.1}}:scope",
    ]
    assert len({key_slot(key) for key in grant.scope_keys}) == 3


async def test_scope_keys_expire_once_their_leases_can_no_longer_be_live(hot_state: HotState) -> None:
    gate = ConcurrencyGate(hot_state)
    effective = _effective({"maxProviderConcurrency": 9, "leaseSeconds": 30})

    grant = await gate.try_acquire(effective, "lease-1")

    assert isinstance(grant, LeaseGrant)
    ttl_ms = await hot_state.redis.pttl(grant.scope_keys[0])
    assert effective.lease_ms < ttl_ms <= effective.lease_ms * 2
