"""Hypothesis explorations run from inside an async test, so the test can judge them as a whole.

Hypothesis drives synchronous functions; pytest-asyncio adapts an async `@given` test only at
the top level, where nothing can look at all its examples afterwards. `explore` runs the
hypothesis engine in a worker thread and each example's coroutine on the test's own event
loop (where the rig's Redis clients and MCP sessions live), the thread waiting for it. A test
that tallies its own examples this way passes or fails on what it ran itself, never on
counters left behind by other tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import SearchStrategy

T = TypeVar("T")

EXAMPLE_TIMEOUT_S = 60.0


def sweep(max_examples: int) -> settings:
    """A fixed, repeatable sample (derandomized: the same examples on every run and machine)."""
    return settings(
        max_examples=max_examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


async def explore(
    strategy: SearchStrategy[T], check: Callable[[T], Awaitable[None]], sample: settings
) -> None:
    """Run `check` on every example hypothesis draws from `strategy` under `sample`."""
    loop = asyncio.get_running_loop()

    @sample
    @given(strategy)
    def example(value: T) -> None:
        asyncio.run_coroutine_threadsafe(check(value), loop).result(timeout=EXAMPLE_TIMEOUT_S)

    await asyncio.to_thread(example)
