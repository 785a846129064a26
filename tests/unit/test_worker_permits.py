"""Issue 17.5: the worker permits a runtime instance's executions share step by step."""

from __future__ import annotations

import asyncio
import time

import pytest

from runtime_core.dag import WorkerPermits
from tests.helpers import wait_until


async def _true(value: bool) -> bool:
    return value


async def test_permits_are_handed_out_in_the_order_they_were_asked_for() -> None:
    permits = WorkerPermits(1)
    order: list[int] = []
    release = asyncio.Event()

    async def worker(n: int) -> None:
        async with permits.held():
            order.append(n)
            await release.wait()

    first = asyncio.create_task(worker(0))
    await wait_until(lambda: _true(permits.in_use == 1))
    waiters = []
    for n in (1, 2, 3):
        waiters.append(asyncio.create_task(worker(n)))
        await wait_until(lambda n=n: _true(permits.waiting == n))
    assert (permits.free, permits.contended) == (0, True)
    release.set()
    await asyncio.gather(first, *waiters)
    assert order == [0, 1, 2, 3]
    assert (permits.in_use, permits.free, permits.contended) == (0, 1, False)


async def test_a_holder_hands_on_only_when_someone_waits_and_its_time_slice_is_over() -> None:
    permits = WorkerPermits(1, time_slice_s=0.05)
    async with permits.held() as permit:
        assert not permit.should_hand_off()  # nobody waits
        waiter = asyncio.create_task(_hold_once(permits))
        await wait_until(lambda: _true(permits.contended))
        assert not permit.should_hand_off()  # wanted, but held for less than a slice
        await wait_until(lambda: _true(time.monotonic() - permit.held_since >= 0.05))
        assert permit.should_hand_off()
    await waiter
    assert permits.in_use == 0


async def _hold_once(permits: WorkerPermits) -> None:
    async with permits.held():
        pass


def test_a_process_needs_at_least_one_permit() -> None:
    with pytest.raises(ValueError, match="at least one worker permit"):
        WorkerPermits(0)
