"""Settings of the dashboard (`/ui` on the HTTP server), read from the environment of `serve`.

Owns the session lifetime, the live-update polling intervals and the cap on open live
streams. Must not hold secrets: sessions are random ids kept server-side.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field


class DashboardSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_ttl_s: int = Field(8 * 3600, ge=60, description="A session ends this long after login.")
    max_sessions: int = Field(10_000, ge=1, description="Oldest sessions end first beyond this many.")
    run_poll_ms: int = Field(500, ge=50, description="How often a run page's live stream reads the run.")
    list_poll_ms: int = Field(2_000, ge=100, description="How often the runs list's live stream reads runs.")
    max_streams: int = Field(200, ge=1, description="Open live streams per process; more answer 503.")

    @classmethod
    def from_env(cls) -> DashboardSettings:
        names = {
            "session_ttl_s": "MCP_RUNTIME_UI_SESSION_TTL_S",
            "run_poll_ms": "MCP_RUNTIME_UI_RUN_POLL_MS",
            "list_poll_ms": "MCP_RUNTIME_UI_LIST_POLL_MS",
            "max_streams": "MCP_RUNTIME_UI_MAX_STREAMS",
        }
        given = {field: os.environ[name] for field, name in names.items() if name in os.environ}
        return cls.model_validate(given)
