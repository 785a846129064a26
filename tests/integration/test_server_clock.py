"""ServerClock: Redis server time for local run timestamps without a TIME per reading."""

from __future__ import annotations

import pytest

from runtime_core.hot_state import HotState, ServerClock
from tests.helpers import command_calls

pytestmark = pytest.mark.redis_kinds("single", "cluster")


async def _time_calls(hot_state: HotState) -> int:
    return await command_calls(hot_state, "cmdstat_time")


async def _calls_of_one_server_read(hot_state: HotState) -> int:
    """TIME commands one `server_time_ms` costs (after a first one: a cluster client's first
    command also discovers the nodes)."""
    await hot_state.server_time_ms()
    calls = await _time_calls(hot_state)
    await hot_state.server_time_ms()
    return await _time_calls(hot_state) - calls


async def test_readings_follow_the_server_clock_with_one_server_read_per_resync(hot_state: HotState) -> None:
    clock = ServerClock(hot_state, resync_after_s=60)
    one_read = await _calls_of_one_server_read(hot_state)
    before = await hot_state.server_time_ms()
    calls = await _time_calls(hot_state)
    readings = [await clock.now_ms() for _ in range(50)]
    assert await _time_calls(hot_state) - calls == one_read
    after = await hot_state.server_time_ms()
    assert readings == sorted(readings)
    assert before - 5 <= readings[0] and readings[-1] <= after + 5


async def test_a_reading_past_the_resync_period_asks_the_server_again(hot_state: HotState) -> None:
    clock = ServerClock(hot_state, resync_after_s=0)
    one_read = await _calls_of_one_server_read(hot_state)
    calls = await _time_calls(hot_state)
    for _ in range(3):
        await clock.now_ms()
    assert await _time_calls(hot_state) - calls == 3 * one_read
