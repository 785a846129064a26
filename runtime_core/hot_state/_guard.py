"""The one place where a Redis connection failure becomes a typed `StoreUnavailableError`.

Owns `GuardedRedis` (a redis.asyncio client whose commands, EVALSHA script calls and
pipelines raise `StoreUnavailableError` instead of redis-py connection / timeout errors), the
error it raises, and the one deadline each guarded call has (REPLY_DEADLINE_S, its whole
pipeline included: the client's sockets have no per-reply timeout, whose timer per reply cost a
pipeline of many commands more than its parsing). A cancellation redis-py swallowed (a
command that returns, or fails as a timeout, after its task was cancelled: redis-py issue
#2028) is raised again, so a task cancelled mid-command stops instead of looping on. Must not
retry: callers decide whether to back off (workers, pumps, heartbeats) or to answer the error
at once (one-shot operations).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import ClusterDownError, RedisClusterException, SlotNotCoveredError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime_core.errors import StoreUnavailableError

_T = TypeVar("_T")

# BusyLoadingError (Redis replaying its AOF after a restart) is a ConnectionError subclass.
# On a Redis Cluster also: the cluster is down, a slot has no master (failover in progress).
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
    ClusterDownError,
    SlotNotCoveredError,
    TryAgainError,
)
REPLY_DEADLINE_S = 10.0
"""How long one guarded call (a command, a script call, a whole pipeline) may wait for Redis."""
# How redis-py's cluster client says it could not reach any startup node.
_NO_CLUSTER_NODE_REACHABLE = "cannot be connected"


def store_unavailable(operation: str, exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(
        f"Redis is unavailable ({operation}): {exc}",
        hint="Check that redis-server is running and REDIS_URL is right, then retry: "
        "every transition is idempotent by claim token or version.",
    )


def _current_cancels() -> int:
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def is_outage(exc: BaseException) -> bool:
    """Redis (or the cluster) cannot answer right now: try again later."""
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return True
    return isinstance(exc, RedisClusterException) and _NO_CLUSTER_NODE_REACHABLE in str(exc)


def reply_error(operation: str, exc: BaseException) -> BaseException:
    """What a caller gets for a failed pipelined reply (a cluster pipeline returns a failed
    node's error in place of its replies): StoreUnavailableError for an outage, else `exc`."""
    return store_unavailable(operation, exc) if is_outage(exc) else exc


async def guarded_call(
    operation: str,
    call: Callable[[], Awaitable[_T]],
) -> _T:
    """Await `call` (at most REPLY_DEADLINE_S: a hung Redis is an outage); an outage becomes
    `StoreUnavailableError`, a swallowed cancellation is re-raised."""
    cancels = _current_cancels()
    try:
        async with asyncio.timeout(REPLY_DEADLINE_S):
            reply = await call()
    except Exception as exc:
        if not is_outage(exc):
            raise
        if _current_cancels() > cancels:
            raise asyncio.CancelledError(f"cancelled during Redis {operation}") from exc
        raise store_unavailable(operation, exc) from exc
    if _current_cancels() > cancels:
        raise asyncio.CancelledError(f"cancelled during Redis {operation}")
    return reply


class GuardedPipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        execute = super().execute
        return await guarded_call("pipeline", lambda: execute(raise_on_error))


class GuardedRedis(Redis):
    """redis.asyncio client that reports an unreachable Redis as `StoreUnavailableError`."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        operation = str(args[0]) if args else "command"
        return await guarded_call(
            operation, lambda: super(GuardedRedis, self).execute_command(*args, **options)
        )

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> GuardedPipeline:
        return GuardedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
