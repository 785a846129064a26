"""Typed wrappers of `lua/lease_acquire.lua` and `lua/lease_release.lua`.

The only place that knows those scripts' KEYS/ARGV order and return codes. Each scope lives
in its own Cluster slot, so a lease in several scopes is taken scope by scope in one
pipeline (one script call per scope, one round trip): when a scope refuses, the scopes that
granted it are released again, so the outcome is all or nothing. It is not atomic: for the
moment between the two calls a concurrent acquirer may see the lease in a scope it is about
to leave and be refused (it retries after the scope's retry delay); no scope ever holds more
leases than its limit, and a holder that dies in between leaves leases that expire with
their lease time. Must not decide which scopes or limits apply: callers pass resolved keys
and limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum, StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import HotState


class LeaseAcquireStatus(IntEnum):
    LIMIT_REACHED = 0
    ACQUIRED = 1


class LeaseReleaseStatus(StrEnum):
    RELEASED = "released"
    """The lease was held in every scope and is gone from all of them."""
    EXPIRED = "expired"
    """The lease had already expired (or was evicted) in at least one scope."""


class LeasesAcquired(BaseModel):
    """Every scope now holds the lease until `expires_at_ms` (Redis time)."""

    model_config = ConfigDict(frozen=True)

    status: Literal[LeaseAcquireStatus.ACQUIRED] = LeaseAcquireStatus.ACQUIRED
    expires_at_ms: int


class ScopeLimitReached(BaseModel):
    """`keys[blocked_index]` was full; no scope received the lease."""

    model_config = ConfigDict(frozen=True)

    status: Literal[LeaseAcquireStatus.LIMIT_REACHED] = LeaseAcquireStatus.LIMIT_REACHED
    blocked_index: int
    current: int
    limit: int


async def acquire_scope_leases(
    hot_state: HotState, keys: Sequence[str], limits: Sequence[int], lease_id: str, lease_ms: int
) -> LeasesAcquired | ScopeLimitReached:
    replies = await _per_scope(
        hot_state, "lease_acquire", keys, [[lease_id, lease_ms, limit] for limit in limits]
    )
    granted = [int(reply[0]) == LeaseAcquireStatus.ACQUIRED for reply in replies]
    if all(granted):
        return LeasesAcquired(expires_at_ms=min(int(reply[1]) for reply in replies))
    await release_scope_leases(
        hot_state, [key for key, ok in zip(keys, granted, strict=True) if ok], lease_id
    )
    blocked = granted.index(False)
    reply = replies[blocked]
    return ScopeLimitReached(blocked_index=blocked, current=int(reply[2]), limit=int(reply[3]))


async def release_scope_leases(hot_state: HotState, keys: Sequence[str], lease_id: str) -> LeaseReleaseStatus:
    replies = await _per_scope(hot_state, "lease_release", keys, [[lease_id]] * len(keys))
    released = sum(int(reply) for reply in replies)
    return LeaseReleaseStatus.RELEASED if released == len(keys) else LeaseReleaseStatus.EXPIRED


async def _per_scope(
    hot_state: HotState, script: str, keys: Sequence[str], args: Sequence[Sequence[str | int]]
) -> list[Any]:
    """`script` once per scope key with its own args: one call, or one pipeline (the keys
    live in different slots; EVAL inside a pipeline never fails with NOSCRIPT)."""
    if not keys:
        return []
    try:
        if len(keys) == 1:
            return [await hot_state.scripts[script](keys=[keys[0]], args=list(args[0]))]
        pipe = hot_state.redis.pipeline(transaction=False)
        source = hot_state.scripts.source(script)
        for key, key_args in zip(keys, args, strict=True):
            pipe.eval(source, 1, key, *key_args)
        return list(await pipe.execute())
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailableError(
            f"Redis is unreachable while running {script}: {exc}",
            hint="Retry with the same lease id when Redis is back (acquiring is idempotent per lease id).",
        ) from exc
