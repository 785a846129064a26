"""Session fixtures: a real redis-server on a free loopback port, a real 3-master Redis
Cluster (started only when a test asks for it), a fresh HotState per test, and the PostgreSQL
server on 127.0.0.1:5432 (made sure to answer once, when a test asks for it).

`redis_target` is the Redis a test runs against: the single node by default; a module or
test marked `@pytest.mark.redis_kinds("single", "cluster")` runs once on each.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state
from tests.postgres import ensure_server, scratch_database
from tests.redis_cluster import RedisClusterServer

REDIS_KINDS = ("single", "cluster")


class RedisTarget(Protocol):
    @property
    def url(self) -> str: ...


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "redis_kinds(*kinds): run the test on each kind of Redis ('single', 'cluster')"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("redis_kinds")
    if marker is None or "redis_target" not in metafunc.fixturenames:
        return
    unknown = set(marker.args) - set(REDIS_KINDS)
    if unknown:
        raise pytest.UsageError(f"unknown redis_kinds {sorted(unknown)}; use {REDIS_KINDS}")
    metafunc.parametrize("redis_target", marker.args, indirect=True)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(Path(tmp_path_factory.mktemp("redis")), appendonly=False).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServer]:
    cluster = RedisClusterServer(Path(tmp_path_factory.mktemp("redis-cluster"))).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres_server() -> None:
    """The shared PostgreSQL server answers (tests make their own databases on it: tests.postgres)."""
    ensure_server()


@pytest.fixture(scope="module")
def postgres_module_database(postgres_server: None) -> Iterator[str]:
    """One scratch database for a test module (tests.durable_backends empties it per test)."""
    with scratch_database("mcprt_module") as name:
        yield name


@pytest.fixture
def redis_target(request: pytest.FixtureRequest) -> RedisTarget:
    kind = getattr(request, "param", "single")
    return request.getfixturevalue("redis_cluster" if kind == "cluster" else "redis_server")


@pytest.fixture
async def hot_state(redis_target: RedisTarget) -> AsyncIterator[HotState]:
    """A client with a unique key prefix, so tests never see each other's keys."""
    state = connect_hot_state(redis_target.url, prefix=f"t{secrets.token_hex(4)}:")
    yield state
    await state.close()
