"""A hung Redis (it accepts and never answers) fails each guarded call at its deadline with
StoreUnavailableError, a whole pipeline included; once Redis answers again the same client works.
The client's sockets have no per-reply timeout: the deadline is the call's (REPLY_DEADLINE_S,
shortened here so the test is quick)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state
from runtime_core.hot_state import _guard as guard

DEADLINE_S = 0.5


async def test_a_hung_redis_fails_each_call_at_its_deadline_and_the_client_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "REPLY_DEADLINE_S", DEADLINE_S)
    server = EmbeddedRedis(tmp_path, appendonly=False).start()
    assert server.pid is not None
    hot_state = connect_hot_state(server.url, prefix="hung:")
    key = hot_state.key("k")
    try:
        await hot_state.redis.set(key, "v")
        os.kill(server.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            pipe = hot_state.redis.pipeline(transaction=False)
            pipe.get(key)
            pipe.get(key)
            with pytest.raises(StoreUnavailableError):
                await pipe.execute()
            with pytest.raises(StoreUnavailableError):
                await hot_state.redis.get(key)
            assert time.monotonic() - started < 10 * DEADLINE_S
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert await hot_state.redis.get(key) == "v"
    finally:
        await hot_state.close()
        server.stop()
