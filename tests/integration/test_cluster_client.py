"""The Redis Cluster client: URL parsing, routing through the real cluster, typed outages."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import connect_hot_state
from runtime_core.hot_state._cluster import cluster_startup_nodes, is_cluster_url
from tests.redis_cluster import RedisClusterServer


def test_a_cluster_url_names_every_startup_node_and_its_credentials() -> None:
    nodes, kwargs = cluster_startup_nodes("rediss+cluster://app:s%40cret@10.0.0.1:7000,10.0.0.2:7001")
    assert [(n.host, n.port) for n in nodes] == [("10.0.0.1", 7000), ("10.0.0.2", 7001)]
    assert kwargs == {"ssl": True, "username": "app", "password": "s@cret"}
    assert is_cluster_url("redis+cluster://h:1") and not is_cluster_url("redis://h:1/0")


@pytest.mark.parametrize("url", ["redis+cluster://host-without-port", "redis+cluster://h:1,:2"])
def test_a_cluster_url_without_host_and_port_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        cluster_startup_nodes(url)


async def test_keys_of_different_slots_live_on_different_masters(redis_cluster: RedisClusterServer) -> None:
    state = connect_hot_state(redis_cluster.url, prefix="clientcheck:")
    try:
        keys = [state.tagged(f"tag{n}", "k") for n in range(30)]
        for key in keys:
            await state.redis.set(key, "v", ex=60)
        owners = {state.redis.get_node_from_key(key).name for key in keys}
        assert len(owners) == 3
        assert await state.server_time_ms() > 0
    finally:
        await state.close()


async def test_a_cluster_that_is_down_answers_store_unavailable(tmp_path: Path) -> None:
    cluster = RedisClusterServer(tmp_path).start()
    state = connect_hot_state(cluster.url, prefix="down:")
    try:
        await state.ping()
        cluster.stop()
        with pytest.raises(StoreUnavailableError) as raised:
            await state.redis.get(state.tagged("x", "k"))
        assert raised.value.code == "store_unavailable"
    finally:
        await state.close()
        cluster.stop()
