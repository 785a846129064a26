"""Typed wrappers of `lua/lease_acquire.lua` and `lua/lease_release.lua`.

The only place that knows those scripts' KEYS/ARGV order and return codes. Must not decide
which scopes or limits apply: callers pass resolved keys and limits.
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
    reply = await _run(hot_state, "lease_acquire", [*keys], [lease_id, lease_ms, *limits])
    if LeaseAcquireStatus(int(reply[0])) is LeaseAcquireStatus.ACQUIRED:
        return LeasesAcquired(expires_at_ms=int(reply[1]))
    return ScopeLimitReached(blocked_index=int(reply[1]) - 1, current=int(reply[2]), limit=int(reply[3]))


async def release_scope_leases(hot_state: HotState, keys: Sequence[str], lease_id: str) -> LeaseReleaseStatus:
    released = int(await _run(hot_state, "lease_release", [*keys], [lease_id]))
    return LeaseReleaseStatus.RELEASED if released == len(keys) else LeaseReleaseStatus.EXPIRED


async def _run(hot_state: HotState, script: str, keys: list[str], args: list[str | int]) -> Any:
    try:
        return await hot_state.scripts[script](keys=keys, args=args)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailableError(
            f"Redis is unreachable while running {script}: {exc}",
            hint="Retry with the same lease id when Redis is back (acquiring is idempotent per lease id).",
        ) from exc
