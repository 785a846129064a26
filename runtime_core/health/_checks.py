"""The readiness checks: each an async callable that returns what it found or raises why not."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from runtime_core.health._data_dir import check_data_dir_writable
from runtime_core.hot_state import HotState
from runtime_core.storage import DurableStore

HealthCheck = Callable[[], Awaitable[str]]
# name -> alive, read at each check (a loop that ended, or was never started, is not alive)
LoopStates = Callable[[], Mapping[str, bool]]


def redis_answers(hot_state: HotState) -> HealthCheck:
    async def check() -> str:
        await hot_state.ping()
        return "answered PING"

    return check


def durable_store_accepts_a_write(store: DurableStore) -> HealthCheck:
    async def check() -> str:
        await store.probe_write()
        return "wrote its probe record"

    return check


def data_dir_accepts_a_write(data_dir: Path) -> HealthCheck:
    async def check() -> str:
        await asyncio.to_thread(check_data_dir_writable, data_dir)
        return "wrote a probe file"

    return check


def background_loops_alive(loops: LoopStates) -> HealthCheck:
    async def check() -> str:
        states = loops()
        dead = sorted(name for name, alive in states.items() if not alive)
        if dead:
            raise RuntimeError(f"not running: {', '.join(dead)}")
        return f"running: {', '.join(sorted(states)) or 'none expected'}"

    return check
