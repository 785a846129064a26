"""The HotState handle: one Redis client, the key prefix and the script registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state._scripts import LuaScripts

DEFAULT_PREFIX = "mcprt:"


@dataclass
class HotState:
    """What every Redis-backed store needs: client, key prefix, loaded scripts."""

    redis: Redis
    prefix: str = DEFAULT_PREFIX
    scripts: LuaScripts = field(init=False)

    def __post_init__(self) -> None:
        self.scripts = LuaScripts(self.redis)

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def tagged(self, tag: str, *parts: str) -> str:
        """Key inside hash slot `{tag}` so one Lua script can touch all of them (Cluster-safe)."""
        return self.prefix + "{" + tag + "}" + "".join(":" + p for p in parts)

    async def server_time_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def ping(self) -> None:
        try:
            await self.redis.ping()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise StoreUnavailableError(
                f"Redis is unreachable: {exc}",
                hint="Start redis-server or fix REDIS_URL; nothing was changed.",
            ) from exc

    async def close(self) -> None:
        await self.redis.aclose()


DEFAULT_MAX_CONNECTIONS = 64


def connect_hot_state(
    url: str,
    prefix: str = DEFAULT_PREFIX,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    **pool_kwargs: Any,
) -> HotState:
    """A client whose pool makes callers wait for a free connection instead of failing.

    Hundreds of concurrent workers then share `max_connections` sockets rather than
    raising "Too many connections" under load.
    """
    pool = BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        max_connections=max_connections,
        timeout=30,
        socket_connect_timeout=5,
        socket_timeout=30,
        health_check_interval=15,
        **pool_kwargs,
    )
    return HotState(redis=Redis(connection_pool=pool), prefix=prefix)
