"""Redis access shared by every hot-state owner.

Owns the Redis client factory, the key prefix / hash-tag layout helpers, loading of the
`lua/*.lua` scripts (EVALSHA through redis-py `register_script`), Redis server time, the
mapping of connection failures to `StoreUnavailableError`, the backoff used by long-lived
loops while Redis is down, and the embedded `redis-server` child process used by the
zero-configuration default. Must not encode any workflow state transition itself: those
live in `lua/` and their owners.
"""

from runtime_core.hot_state._client import HotState, connect_hot_state, time_reply_ms
from runtime_core.hot_state._embedded import EmbeddedRedis, find_free_port
from runtime_core.hot_state._guard import GuardedRedis, store_unavailable
from runtime_core.hot_state._retry import (
    DEFAULT_STORE_RETRY,
    StoreOutage,
    StoreRetryPolicy,
    retry_while_unavailable,
)
from runtime_core.hot_state._scripts import LUA_DIR, LuaScripts

__all__ = [
    "DEFAULT_STORE_RETRY",
    "LUA_DIR",
    "EmbeddedRedis",
    "GuardedRedis",
    "HotState",
    "LuaScripts",
    "StoreOutage",
    "StoreRetryPolicy",
    "connect_hot_state",
    "find_free_port",
    "retry_while_unavailable",
    "store_unavailable",
    "time_reply_ms",
]
