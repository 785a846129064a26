"""The Redis Cluster client: `redis+cluster://` URLs, typed outages, waiting for a connection.

Owns `GuardedRedisCluster` (redis-py's asyncio `RedisCluster` whose commands, script calls
and pipelines raise `StoreUnavailableError` when the cluster cannot answer, like
`GuardedRedis` does for one node) and parsing a cluster URL into startup nodes. redis-py's
cluster client refuses a command beyond `max_connections` per node instead of waiting for
one, so in-flight calls are bounded by a semaphore: hundreds of workers then queue for a
connection, as they do on the single-node `BlockingConnectionPool`. When a master goes
down, redis-py answers `ClusterDownError` by closing every node's connections, including
the ones other tasks are writing on; their commands then fail with an `AttributeError`
from inside redis-py's connection (its stream is gone). That is the same outage, so it is
reported as `StoreUnavailableError` too. Must not route keys itself (redis-py maps each key
to its slot) nor retry beyond redis-py's own redirections.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.exceptions import RedisClusterException

from runtime_core.hot_state._guard import guarded_call, store_unavailable

_T = TypeVar("_T")
# Where redis-py's asyncio connection lives: an AttributeError raised there means the
# connection was closed under the command by another task's cluster re-initialization.
_REDIS_CONNECTION_MODULE = "redis/asyncio/connection.py"

CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def cluster_startup_nodes(url: str) -> tuple[list[ClusterNode], dict[str, Any]]:
    """`redis+cluster://[user:password@]host:port[,host:port...]` -> startup nodes + auth kwargs."""
    parts = urlsplit(url)
    if parts.scheme not in CLUSTER_SCHEMES:
        raise ValueError(f"not a Redis Cluster URL: scheme {parts.scheme!r}")
    credentials, _, hosts = parts.netloc.rpartition("@")
    nodes = []
    for hostport in hosts.split(","):
        host, _, port = hostport.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"Redis Cluster URL needs host:port for every node, got {hostport!r}")
        nodes.append(ClusterNode(host.strip("[]"), int(port)))
    kwargs: dict[str, Any] = {"ssl": CLUSTER_SCHEMES[parts.scheme]}
    if credentials:
        user, _, password = credentials.partition(":")
        kwargs.update(username=unquote(user) or None, password=unquote(password) or None)
    return nodes, kwargs


def _closed_under_us(exc: AttributeError) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.replace("\\", "/").endswith(_REDIS_CONNECTION_MODULE)


async def _cluster_call(operation: str, call: Callable[[], Awaitable[_T]]) -> _T:
    try:
        return await guarded_call(operation, call)
    except AttributeError as exc:
        if not _closed_under_us(exc):
            raise
        raise store_unavailable(operation, exc) from exc


class GuardedClusterPipeline(ClusterPipeline):
    def __init__(self, client: GuardedRedisCluster, transaction: bool | None = None) -> None:
        super().__init__(client, transaction)
        self._guarded = client

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        async with self._guarded.in_flight:
            execute = super().execute
            return await _cluster_call("pipeline", lambda: execute(raise_on_error, allow_redirections))


class GuardedRedisCluster(RedisCluster):
    """RedisCluster that reports an unreachable cluster as `StoreUnavailableError`."""

    def __init__(self, *args: Any, max_in_flight: int, **kwargs: Any) -> None:
        super().__init__(*args, max_connections=max_in_flight, **kwargs)
        self.in_flight = asyncio.Semaphore(max_in_flight)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        operation = str(args[0]) if args else "command"
        async with self.in_flight:
            return await _cluster_call(
                operation,
                lambda: super(GuardedRedisCluster, self).execute_command(*args, **options),
            )

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> GuardedClusterPipeline:
        if shard_hint:
            raise RedisClusterException("shard_hint is not supported in cluster mode")
        return GuardedClusterPipeline(self, transaction)


def connect_cluster(url: str, *, max_connections: int, **kwargs: Any) -> GuardedRedisCluster:
    nodes, auth = cluster_startup_nodes(url)
    return GuardedRedisCluster(
        startup_nodes=nodes, decode_responses=True, max_in_flight=max_connections, **auth, **kwargs
    )
