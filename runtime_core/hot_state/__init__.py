"""Redis access shared by every hot-state owner.

Owns the Redis client factory, the key prefix / hash-tag layout helpers, loading of the
`lua/*.lua` scripts (EVALSHA through redis-py `register_script`), Redis server time (read
at once, or estimated between periodic reads by `ServerClock`), the
mapping of connection failures to `StoreUnavailableError`, the backoff used by long-lived
loops while Redis is down, the dataset epoch (how a process learns that the dataset it worked
in was lost), the persistence check made at start, and the embedded `redis-server` child
process used by the zero-configuration default (one per data directory, adopted after its
owner was killed) with the data-directory lock that keeps a second owner out. Must not
encode any workflow state transition itself: those live in `lua/` and their owners.
"""

from runtime_core.hot_state._client import HotState, connect_hot_state, time_reply_ms
from runtime_core.hot_state._clock import ServerClock
from runtime_core.hot_state._coalescing import MAX_COALESCED_CALLS, Coalescer, read_outcome
from runtime_core.hot_state._data_dir_lock import DataDirLock
from runtime_core.hot_state._durability import PERSISTENCE_SETTING, PersistenceReport, check_persistence
from runtime_core.hot_state._embedded import (
    REDIS_SERVER_ENV,
    EmbeddedRedis,
    find_free_port,
    find_redis_server,
)
from runtime_core.hot_state._epoch import dataset_epoch, epoch_key
from runtime_core.hot_state._guard import REPLY_DEADLINE_S, GuardedRedis, reply_error, store_unavailable
from runtime_core.hot_state._retry import (
    DEFAULT_STORE_RETRY,
    StoreOutage,
    StoreRetryPolicy,
    retry_while_unavailable,
)
from runtime_core.hot_state._scripts import LUA_DIR, LuaScripts, script_source

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Client, keys and scripts
    "HotState",
    "connect_hot_state",
    "time_reply_ms",
    "ServerClock",
    "LuaScripts",
    "LUA_DIR",
    "script_source",
    "Coalescer",
    "MAX_COALESCED_CALLS",
    "read_outcome",
    # Outages
    "GuardedRedis",
    "REPLY_DEADLINE_S",
    "store_unavailable",
    "reply_error",
    "StoreOutage",
    "StoreRetryPolicy",
    "DEFAULT_STORE_RETRY",
    "retry_while_unavailable",
    # Dataset epoch and persistence
    "dataset_epoch",
    "epoch_key",
    "check_persistence",
    "PersistenceReport",
    "PERSISTENCE_SETTING",
    # Embedded redis-server
    "EmbeddedRedis",
    "REDIS_SERVER_ENV",
    "find_redis_server",
    "DataDirLock",
    "find_free_port",
]
