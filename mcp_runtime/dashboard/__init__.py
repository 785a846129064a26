"""The run dashboard served under `/ui` by `mcp-runtime serve --transport http`.

Owns the browser side of the control plane: signing in with a configured token (kept as a
server-side session behind an HttpOnly, SameSite=Strict cookie), the runs list, the run page
(DAG coloured by status, timeline, ledger, errors and retries per step, actions), capacity,
live updates over server-sent events, and the vendored static files (no CDN, no build step).
Every page and action goes through the tool guard with the permission of the tool doing the
same, and reads the runtime_core services the tools call. Must not hold runtime behaviour.
"""

from mcp_runtime.dashboard._app import dashboard_app
from mcp_runtime.dashboard._sessions import SESSION_COOKIE, SessionStore
from mcp_runtime.dashboard._settings import DashboardSettings

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # The app
    "dashboard_app",
    "DashboardSettings",
    # Sessions
    "SessionStore",
    "SESSION_COOKIE",
]
