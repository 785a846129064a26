"""The Redis server's clock, read without a round trip per reading.

Owns `ServerClock`: it reads Redis `TIME` at most once per `resync_after_s` and estimates the
server time in between from this process's monotonic clock (immune to local wall-clock
jumps; off by at most half a round trip plus drift over one resync period). For timestamps
that describe when something happened (a local run's created / started / completed times),
not for deadlines a Lua script compares against its own `TIME`. Must not cache anything
but the offset.
"""

from __future__ import annotations

import time

from runtime_core.hot_state._client import HotState

DEFAULT_RESYNC_AFTER_S = 1.0


class ServerClock:
    def __init__(self, hot_state: HotState, *, resync_after_s: float = DEFAULT_RESYNC_AFTER_S) -> None:
        self.hot_state = hot_state
        self.resync_after_s = resync_after_s
        self._offset_ms: float | None = None  # server ms minus local monotonic ms
        self._synced_at = 0.0

    async def now_ms(self) -> int:
        local = time.monotonic()
        if self._offset_ms is None or local - self._synced_at > self.resync_after_s:
            server = await self.hot_state.server_time_ms()
            local = time.monotonic()
            self._offset_ms, self._synced_at = server - local * 1000, local
        return int(local * 1000 + self._offset_ms)
