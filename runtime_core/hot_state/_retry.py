"""Capped exponential backoff for long-lived loops while Redis is unavailable.

Owns `StoreRetryPolicy` (initial delay, cap, jitter) and `retry_while_unavailable`, which
repeats one idempotent operation until it stops raising `StoreUnavailableError`, logging
one structured `store.unavailable` warning per failed attempt. Workers, the instance
controller, pumps and heartbeats use it; one-shot caller operations must not (they answer
`StoreUnavailableError` at once). Must not swallow any other error.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.errors import StoreUnavailableError

T = TypeVar("T")

log = logging.getLogger("runtime_core.hot_state")


class StoreRetryPolicy(BaseModel):
    """Delay before attempt n+1 = min(max_ms, initial_ms * 2**(n-1)), +/- `jitter` of it."""

    model_config = ConfigDict(frozen=True)

    initial_ms: int = Field(default=50, ge=1)
    max_ms: int = Field(default=2_000, ge=1)
    jitter: float = Field(default=0.2, ge=0.0, le=1.0)

    def delay_s(self, failures: int) -> float:
        base = min(self.max_ms, self.initial_ms * 2 ** min(max(failures - 1, 0), 30))
        spread = base * self.jitter
        return max(0.0, base + random.uniform(-spread, spread)) / 1000


DEFAULT_STORE_RETRY = StoreRetryPolicy()


class StoreOutage:
    """Backoff state of one loop: `await outage.wait(exc)` after a failure, `recovered()` after a success."""

    def __init__(
        self,
        operation: str,
        policy: StoreRetryPolicy = DEFAULT_STORE_RETRY,
        *,
        logger: logging.Logger = log,
        **context: Any,
    ) -> None:
        self.operation = operation
        self.policy = policy
        self.logger = logger
        self.context = context
        self.failures = 0
        self._since: float | None = None

    async def wait(self, exc: StoreUnavailableError, delay: float | None = None) -> None:
        self.failures += 1
        if self._since is None:
            self._since = time.monotonic()
        delay = self.policy.delay_s(self.failures) if delay is None else delay
        self.logger.warning(
            "store.unavailable operation=%s attempt=%d retry_in_ms=%d",
            self.operation,
            self.failures,
            int(delay * 1000),
            extra={
                "operation": self.operation,
                "attempt": self.failures,
                "retry_in_ms": int(delay * 1000),
                "outage_ms": int((time.monotonic() - self._since) * 1000),
                "error": exc.message,
                **self.context,
            },
        )
        await asyncio.sleep(delay)  # backoff before retrying an unavailable store

    def recovered(self) -> None:
        if self.failures:
            self.logger.info(
                "store.recovered operation=%s attempts=%d",
                self.operation,
                self.failures,
                extra={"operation": self.operation, "attempts": self.failures, **self.context},
            )
        self.failures = 0
        self._since = None


async def retry_while_unavailable(
    operation: Callable[[], Awaitable[T]],
    what: str,
    policy: StoreRetryPolicy = DEFAULT_STORE_RETRY,
    *,
    give_up_after_s: float | None = None,
    failed: StoreUnavailableError | None = None,
    logger: logging.Logger = log,
    **context: Any,
) -> T:
    """Run `operation` (idempotent) until Redis answers; other errors propagate at once.

    With `give_up_after_s`, the StoreUnavailableError of the last attempt is raised once
    the next backoff would end past that many seconds after the first attempt. `failed`: the
    caller's own first attempt failed with it (so the first backoff comes before any attempt).
    """
    outage: StoreOutage | None = None  # made at the first failure: most calls succeed at once
    deadline = None if give_up_after_s is None else time.monotonic() + give_up_after_s
    while True:
        if failed is not None:
            outage = outage or StoreOutage(what, policy, logger=logger, **context)
            next_delay = policy.delay_s(outage.failures + 1)
            if deadline is not None and time.monotonic() + next_delay > deadline:
                raise failed
            await outage.wait(failed, next_delay)
        try:
            result = await operation()
        except StoreUnavailableError as exc:
            failed = exc
            continue
        if outage is not None:
            outage.recovered()
        return result
