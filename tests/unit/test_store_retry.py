"""`retry_while_unavailable`: an idempotent store call repeated with capped backoff while Redis
is unavailable, one `store.unavailable` warning per failed attempt, other errors at once; a
caller that made the first attempt itself hands its failure over (`failed`)."""

from __future__ import annotations

import logging

import pytest

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import StoreRetryPolicy, retry_while_unavailable

FAST = StoreRetryPolicy(initial_ms=1, max_ms=1, jitter=0.0)


class Flaky:
    """Unavailable for the first `failures` calls, then answers how many calls it took."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error or StoreUnavailableError("redis is away")
        return self.calls


def _warnings(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.attempt for r in caplog.records if r.getMessage().startswith("store.unavailable")]


async def test_the_call_is_repeated_until_redis_answers_with_a_warning_per_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    operation = Flaky(failures=2)
    with caplog.at_level(logging.INFO, logger="runtime_core.hot_state"):
        assert await retry_while_unavailable(operation, "test.op", FAST) == 3
    assert _warnings(caplog) == [1, 2]
    assert any(r.getMessage().startswith("store.recovered") for r in caplog.records)


async def test_a_failure_handed_over_is_backed_off_before_the_next_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    operation = Flaky(failures=1)
    with caplog.at_level(logging.INFO, logger="runtime_core.hot_state"):
        result = await retry_while_unavailable(
            operation, "test.op", FAST, failed=StoreUnavailableError("first attempt failed")
        )
    assert (result, operation.calls) == (2, 2)  # one failed attempt, one that answered
    assert _warnings(caplog) == [1, 2]  # the handed-over failure counts as the first


async def test_a_handed_over_failure_past_the_deadline_is_raised_without_another_attempt() -> None:
    operation = Flaky(failures=0)
    failure = StoreUnavailableError("first attempt failed")
    with pytest.raises(StoreUnavailableError) as raised:
        await retry_while_unavailable(operation, "test.op", FAST, give_up_after_s=0.0, failed=failure)
    assert raised.value is failure and operation.calls == 0


async def test_any_other_error_propagates_at_once() -> None:
    operation = Flaky(failures=5, error=ValueError("bad data"))
    with pytest.raises(ValueError, match="bad data"):
        await retry_while_unavailable(operation, "test.op", FAST)
    assert operation.calls == 1
