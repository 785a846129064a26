"""The one place where a Redis connection failure becomes a typed `StoreUnavailableError`.

Owns `GuardedRedis` (a redis.asyncio client whose commands, EVALSHA script calls and
pipelines raise `StoreUnavailableError` instead of redis-py connection / timeout errors) and
the error it raises. A cancellation redis-py swallowed (a command that returns, or fails as
a timeout, after its task was cancelled: redis-py issue #2028) is raised again, so a task
cancelled mid-command stops instead of looping on. Must not retry: callers decide whether
to back off (workers, pumps, heartbeats) or to answer the error at once (one-shot
operations).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime_core.errors import StoreUnavailableError

# BusyLoadingError (Redis replaying its AOF after a restart) is a ConnectionError subclass.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)


def store_unavailable(operation: str, exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(
        f"Redis is unavailable ({operation}): {exc}",
        hint="Check that redis-server is running and REDIS_URL is right, then retry: "
        "every transition is idempotent by claim token or version.",
    )


def _translated(operation: str, exc: BaseException, cancels_before: int) -> BaseException:
    if _cancelled_since(cancels_before):
        return asyncio.CancelledError(f"cancelled during Redis {operation}")
    return store_unavailable(operation, exc)


def _cancels() -> int:
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def _cancelled_since(cancels_before: int) -> bool:
    return _cancels() > cancels_before


class GuardedPipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        cancels = _cancels()
        try:
            replies = await super().execute(raise_on_error)
        except UNAVAILABLE_ERRORS as exc:
            raise _translated("pipeline", exc, cancels) from exc
        if _cancelled_since(cancels):
            raise asyncio.CancelledError("cancelled during a Redis pipeline")
        return replies


class GuardedRedis(Redis):
    """redis.asyncio client that reports an unreachable Redis as `StoreUnavailableError`."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        cancels = _cancels()
        operation = str(args[0]) if args else "command"
        try:
            reply = await super().execute_command(*args, **options)
        except UNAVAILABLE_ERRORS as exc:
            raise _translated(operation, exc, cancels) from exc
        if _cancelled_since(cancels):
            raise asyncio.CancelledError(f"cancelled during Redis {operation}")
        return reply

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> GuardedPipeline:
        return GuardedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
