"""PeriodicPass, the loop of the background passes (lifecycle sweep and purge, the scheduler):
woken at once, told by a pass when to run next, alive through failing passes (logged without
the values they carry) and through store outages (capped backoff, then recovered)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from pydantic import BaseModel

from runtime_core.errors import StoreUnavailableError
from runtime_core.lifecycle import NextPass, PeriodicPass
from tests.helpers import wait_until

HOUR_MS = 3_600_000  # an interval no test waits for: a pass that ran again was told to
SECRET = "sk-live-never-in-a-log-1234"
log = logging.getLogger("tests.periodic_pass")


class Passes:
    """A pass whose outcome each test chooses: returns or raises what `outcome()` gives."""

    def __init__(self, outcome: Callable[[int], object] = lambda _: None) -> None:
        self.count = 0
        self.outcome = outcome

    async def __call__(self) -> object:
        self.count += 1
        result = self.outcome(self.count)
        if isinstance(result, BaseException):
            raise result
        return result

    def reached(self, count: int) -> Callable[[], Awaitable[bool]]:
        async def reached() -> bool:
            return self.count >= count

        return reached


@pytest.fixture
async def loops() -> AsyncIterator[list[PeriodicPass]]:
    started: list[PeriodicPass] = []
    yield started
    for loop in started:
        await loop.stop()


def _started(loops: list[PeriodicPass], passes: Passes, interval_ms: int = HOUR_MS) -> PeriodicPass:
    loop = PeriodicPass("test.periodic", passes, interval_ms, log)
    loop.start()
    loops.append(loop)
    return loop


async def test_a_pass_returning_next_pass_runs_again_after_that_wait_not_the_interval(
    loops: list[PeriodicPass],
) -> None:
    passes = Passes(lambda _: NextPass(after_ms=1))
    _started(loops, passes)
    await wait_until(passes.reached(3))


async def test_wake_runs_the_next_pass_now(loops: list[PeriodicPass]) -> None:
    passes = Passes()
    loop = _started(loops, passes)
    await wait_until(passes.reached(1))
    loop.wake()
    await wait_until(passes.reached(2))
    assert loop.alive


async def test_a_failing_pass_is_logged_without_its_values_and_the_loop_goes_on(
    loops: list[PeriodicPass], caplog: pytest.LogCaptureFixture
) -> None:
    class Row(BaseModel):
        input: dict[str, str]

    def outcome(count: int) -> object:
        if count == 1:
            try:
                Row.model_validate({"input": [SECRET]})
            except ValueError as exc:
                return exc
        return NextPass(after_ms=1) if count == 2 else None

    passes = Passes(outcome)
    caplog.set_level(logging.INFO, logger=log.name)
    loop = PeriodicPass("test.periodic", passes, 1, log)  # the failed pass waits the interval only
    loop.start()
    loops.append(loop)
    await wait_until(passes.reached(3))
    assert loop.alive
    [failed] = [r for r in caplog.records if r.getMessage() == "test.periodic.pass_failed"]
    assert "Row" in failed.error and "input" in failed.error  # type: ignore[attr-defined]
    assert all(SECRET not in f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert failed.exc_info is None  # a traceback would print the error's message, values and all


async def test_a_store_outage_backs_off_then_recovers(
    loops: list[PeriodicPass], caplog: pytest.LogCaptureFixture
) -> None:
    outage = StoreUnavailableError("Redis is unavailable")
    passes = Passes(lambda count: outage if count <= 2 else NextPass(after_ms=1))
    caplog.set_level(logging.INFO, logger=log.name)
    loop = _started(loops, passes)
    await wait_until(passes.reached(4))
    assert loop.alive
    messages = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("store.unavailable operation=test.periodic") for m in messages) == 2
    assert any(m.startswith("store.recovered operation=test.periodic attempts=2") for m in messages)


async def test_stop_ends_a_loop_waiting_its_interval(loops: list[PeriodicPass]) -> None:
    passes = Passes()
    loop = _started(loops, passes)
    await wait_until(passes.reached(1))
    await loop.stop()
    assert not loop.alive and passes.count == 1
