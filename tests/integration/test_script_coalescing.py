"""Concurrent independent calls (hot scripts, plain command groups) share pipelined round
trips, and stay correct: each caller gets its own reply or its own error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import ResponseError

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import MAX_COALESCED_CALLS, EmbeddedRedis, HotState, connect_hot_state
from tests.helpers import command_calls

pytestmark = pytest.mark.redis_kinds("single", "cluster")


def _time_calls(hot_state: HotState, count: int) -> list:
    script = hot_state.coalesced("server_time")
    return [script([hot_state.tagged(f"k{n}", "x")], []) for n in range(count)]


async def test_concurrent_calls_are_answered_each_with_its_own_reply(hot_state: HotState) -> None:
    replies = await asyncio.gather(*_time_calls(hot_state, 50))
    assert len(replies) == 50 and all(len(reply) == 2 for reply in replies)


class _CountingConnection(Connection):
    sends = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        _CountingConnection.sends += 1
        await super().send_packed_command(command, check_health)


@pytest.mark.redis_kinds("single")
async def test_calls_made_while_one_is_in_flight_go_out_together(redis_target: EmbeddedRedis) -> None:
    state = connect_hot_state(redis_target.url, prefix="coalesce:", connection_class=_CountingConnection)
    try:
        await asyncio.gather(*_time_calls(state, 1))  # connect and load the script
        before_sends = _CountingConnection.sends
        before_runs = await command_calls(state, "cmdstat_evalsha")
        await asyncio.gather(*_time_calls(state, 40))
        # The first call goes alone; the 39 made while it was in flight share one pipeline.
        assert _CountingConnection.sends - before_sends == 2
        assert await command_calls(state, "cmdstat_evalsha") - before_runs == 40
    finally:
        await state.close()


@pytest.mark.redis_kinds("single")
async def test_the_next_calls_of_answered_callers_join_the_calls_made_meanwhile(
    redis_target: EmbeddedRedis,
) -> None:
    """Two callers make a call, then another as soon as it is answered; a third caller's call
    arrives while their first round trip is in flight. The answered callers' next calls go out
    with it: two round trips, not a third one for the calls made a loop turn late."""
    state = connect_hot_state(redis_target.url, prefix="coalesce-next:", connection_class=_CountingConnection)
    script = state.coalesced("server_time")
    key = [state.tagged("k", "x")]

    async def twice() -> None:
        await script(key, [])
        await script(key, [])

    async def meanwhile() -> None:
        await asyncio.sleep(0)  # after the first round trip left (it waits on the socket)
        await asyncio.sleep(0)
        await script(key, [])

    try:
        await script(key, [])  # connect and load the script
        before_sends = _CountingConnection.sends
        await asyncio.gather(twice(), twice(), meanwhile())
        assert _CountingConnection.sends - before_sends == 2
    finally:
        await state.close()


@pytest.mark.redis_kinds("single")
async def test_calls_of_different_scripts_and_command_groups_go_out_together(
    redis_target: EmbeddedRedis,
) -> None:
    state = connect_hot_state(
        redis_target.url, prefix="coalesce-mixed:", connection_class=_CountingConnection
    )
    keys = [state.key(f"plain{n}") for n in range(5)]

    def write_then_read(key: str) -> Any:
        return state.coalescer.commands(lambda pipe: (pipe.set(key, key), pipe.get(key)))

    try:
        await asyncio.gather(*_time_calls(state, 1))  # connect and load the script
        before_sends = _CountingConnection.sends
        replies = await asyncio.gather(*_time_calls(state, 5), *(write_then_read(key) for key in keys))
        assert _CountingConnection.sends - before_sends <= 2  # at most the first alone, then the others
        assert all(len(reply) == 2 for reply in replies[:5])
        assert replies[5:] == [[True, key] for key in keys]
    finally:
        await state.close()


@pytest.mark.redis_kinds("single")
async def test_a_burst_larger_than_one_batch_goes_out_in_bounded_round_trips(
    redis_target: EmbeddedRedis,
) -> None:
    state = connect_hot_state(
        redis_target.url, prefix="coalesce-burst:", connection_class=_CountingConnection
    )
    try:
        await asyncio.gather(*_time_calls(state, 1))  # connect and load the script
        before_sends = _CountingConnection.sends
        calls = 2 * MAX_COALESCED_CALLS + 10
        replies = await asyncio.gather(*_time_calls(state, calls))
        assert len(replies) == calls and all(len(reply) == 2 for reply in replies)
        sends = _CountingConnection.sends - before_sends
        assert 3 <= sends <= 4  # MAX_COALESCED_CALLS calls at most per round trip (the first may go alone)
    finally:
        await state.close()


async def test_a_failing_call_fails_only_its_own_caller(hot_state: HotState) -> None:
    text = hot_state.tagged("coalesce-text", "x")
    await hot_state.redis.set(text, "not a hash")
    outcomes = await asyncio.gather(
        *_time_calls(hot_state, 3),
        hot_state.coalescer.commands(lambda pipe: pipe.hget(text, "field")),
        hot_state.coalescer.commands(lambda pipe: pipe.get(text)),
        return_exceptions=True,
    )
    assert all(len(reply) == 2 for reply in outcomes[:3])
    assert isinstance(outcomes[3], ResponseError) and "WRONGTYPE" in str(outcomes[3])
    assert outcomes[4] == ["not a hash"]


async def test_a_flushed_script_cache_is_reloaded_and_every_call_still_runs(hot_state: HotState) -> None:
    await asyncio.gather(*_time_calls(hot_state, 5))
    await hot_state.redis.script_flush()
    replies = await asyncio.gather(*_time_calls(hot_state, 20))
    assert len(replies) == 20


async def test_an_unreachable_redis_fails_every_waiting_call_with_store_unavailable(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path, appendonly=False).start()
    state = connect_hot_state(server.url, prefix="coalesce-down:")
    try:
        await asyncio.gather(*_time_calls(state, 3))
        server.stop()
        outcomes = await asyncio.gather(*_time_calls(state, 10), return_exceptions=True)
        assert all(isinstance(o, StoreUnavailableError) for o in outcomes), outcomes
    finally:
        await state.close()
        server.stop()
