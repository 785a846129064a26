"""The HotState handle: one Redis client, the key prefix and the script registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from runtime_core.hot_state._cluster import connect_cluster, is_cluster_url
from runtime_core.hot_state._coalescing import CoalescedScript, Coalescer
from runtime_core.hot_state._guard import GuardedRedis
from runtime_core.hot_state._packing import one_call_packing
from runtime_core.hot_state._scripts import LuaScripts

DEFAULT_PREFIX = "mcprt:"


def time_reply_ms(reply: tuple[int | str, int | str]) -> int:
    """Milliseconds from a Redis TIME reply (seconds, microseconds), e.g. inside a pipeline."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


@dataclass
class HotState:
    """What every Redis-backed store needs: client, key prefix, loaded scripts.

    `redis` is a single-node `Redis` or a `RedisCluster`: callers use only commands and
    keyed scripts both route the same way.
    """

    redis: Redis | RedisCluster
    prefix: str = DEFAULT_PREFIX
    partitions: int | None = None
    """How many hash-tag partitions a partitioned key family (the shared queue) spreads over.
    Part of the key layout: every process sharing one Redis must agree. None: by deployment
    (`default_partitions`)."""
    scripts: LuaScripts = field(init=False)
    coalescer: Coalescer = field(init=False)
    """Concurrent independent calls share pipelined round trips (see `Coalescer`)."""
    _coalesced: dict[str, CoalescedScript] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.scripts = LuaScripts(self.redis)
        self.coalescer = Coalescer(self.redis)

    @property
    def partition_count(self) -> int:
        return self.partitions or default_partitions(self.redis)

    def coalesced(self, name: str) -> CoalescedScript:
        """The script `name` whose concurrent calls share pipelined round trips."""
        if name not in self._coalesced:
            self._coalesced[name] = CoalescedScript(self.coalescer, self.scripts[name])
        return self._coalesced[name]

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def tagged(self, tag: str, *parts: str) -> str:
        """Key inside hash slot `{tag}` so one Lua script can touch all of them (Cluster-safe)."""
        return self.prefix + "{" + tag + "}" + "".join(":" + p for p in parts)

    def queue_server_time(self, pipe: Any, slot_key: str) -> None:
        """Queue a read of the server clock of `slot_key`'s node on `pipe` (a TIME reply).

        Cluster pipelines refuse the keyless TIME; this routes by `slot_key` on both kinds.
        """
        pipe.eval(self.scripts.source("server_time"), 1, slot_key)

    async def server_time_ms(self) -> int:
        return time_reply_ms(await self.redis.time())

    async def ping(self) -> None:
        """Raises StoreUnavailableError when Redis cannot be reached."""
        await self.redis.ping()

    async def close(self) -> None:
        await self.redis.aclose()


CLUSTER_PARTITIONS = 16
"""A Redis Cluster spreads partitioned key families over 16 hash tags (so over every master
of a cluster of up to a few masters); a single Redis has one node, so one partition."""


def default_partitions(redis: Redis | RedisCluster) -> int:
    return CLUSTER_PARTITIONS if isinstance(redis, RedisCluster) else 1


DEFAULT_MAX_CONNECTIONS = 64
# Bounded waits, so a call against a dead or hung Redis fails with StoreUnavailableError
# instead of hanging: connect, waiting for a free pooled connection, and each guarded call
# (REPLY_DEADLINE_S, see `guarded_call`: one deadline per call, not a timer per reply read).
DEFAULT_POOL_SETTINGS: dict[str, Any] = {
    "timeout": 10,
    "socket_connect_timeout": 3,
    "socket_timeout": None,
    "health_check_interval": 15,
}


def _reconnect_once() -> dict[str, Any]:
    """One immediate retry on a fresh connection: a pooled socket left over from before a
    Redis restart fails once and is replaced, instead of failing the caller's call."""
    return {"retry": Retry(NoBackoff(), 1), "retry_on_error": [RedisConnectionError]}


def connect_hot_state(
    url: str,
    prefix: str = DEFAULT_PREFIX,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    partitions: int | None = None,
    **pool_kwargs: Any,
) -> HotState:
    """A guarded client whose pool makes callers wait for a free connection instead of failing.

    Hundreds of concurrent workers then share `max_connections` sockets rather than
    raising "Too many connections" under load. Every connection failure or timeout
    surfaces as `StoreUnavailableError` (see `GuardedRedis`). A `redis+cluster://h:p,h:p`
    URL selects the Redis Cluster client (`GuardedRedisCluster`) with the same guarantees.
    """
    if is_cluster_url(url):
        cluster = connect_cluster(
            url,
            max_connections=max_connections,
            socket_connect_timeout=DEFAULT_POOL_SETTINGS["socket_connect_timeout"],
            socket_timeout=DEFAULT_POOL_SETTINGS["socket_timeout"],
        )
        return HotState(redis=cluster, prefix=prefix, partitions=partitions)
    pool = BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        max_connections=max_connections,
        **{**DEFAULT_POOL_SETTINGS, **_reconnect_once(), **pool_kwargs},
    )
    return HotState(
        redis=GuardedRedis(connection_pool=one_call_packing(pool)), prefix=prefix, partitions=partitions
    )
