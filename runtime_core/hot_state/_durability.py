"""Whether the Redis in use persists what it acknowledged (AOF), checked once at start.

Owns `check_persistence`: reads `appendonly` through CONFIG GET and reports it. Without
`appendonly yes` a Redis restart loses every active run's hot state (the runtime detects that
through the dataset epoch and fails or restores the runs, but cannot undo it). A Redis whose
CONFIG command is disabled (managed services) is reported as unknown. Must not change the
Redis configuration.
"""

from __future__ import annotations

from pydantic import BaseModel
from redis.exceptions import RedisError

from runtime_core.hot_state._client import HotState

PERSISTENCE_SETTING = "appendonly"


class PersistenceReport(BaseModel):
    """`appendonly`: True / False as configured, None when CONFIG GET is not allowed."""

    appendonly: bool | None
    detail: str = ""

    @property
    def durable(self) -> bool:
        return self.appendonly is True


async def check_persistence(hot_state: HotState) -> PersistenceReport:
    try:
        reply = await hot_state.redis.config_get(PERSISTENCE_SETTING)
    except RedisError as exc:  # CONFIG renamed or refused (managed Redis): cannot tell
        return PersistenceReport(appendonly=None, detail=f"CONFIG GET {PERSISTENCE_SETTING} failed: {exc}")
    value = str(reply.get(PERSISTENCE_SETTING, "")).lower()
    if not value:
        return PersistenceReport(appendonly=None, detail=f"CONFIG GET {PERSISTENCE_SETTING} returned nothing")
    return PersistenceReport(appendonly=value == "yes", detail=f"{PERSISTENCE_SETTING} {value}")
