"""Session fixtures: a real redis-server on a free loopback port, and a fresh HotState per test."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(Path(tmp_path_factory.mktemp("redis")), appendonly=False).start()
    yield server
    server.stop()


@pytest.fixture
async def hot_state(redis_server: EmbeddedRedis) -> AsyncIterator[HotState]:
    """A client with a unique key prefix, so tests never see each other's keys."""
    state = connect_hot_state(redis_server.url, prefix=f"t{secrets.token_hex(4)}:")
    yield state
    await state.close()
