"""Dashboard sessions: a random session id in an HttpOnly cookie, the session kept server-side.

Owns opening a session after a successful sign-in (a fresh 256-bit id: no fixation) for the
principal it proved, finding it again from the cookie (expired sessions end), closing it at
logout, the per-session CSRF token and the one-shot notice shown after an action. Only the
sha256 of a session id is kept, never the id itself, and never the token the user logged in
with. Sessions live in this serving process: a restart logs everyone out (several `serve`
processes behind one address need sticky sessions). Must not authorize anything.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from mcp_runtime.auth import Principal

SESSION_COOKIE = "mcprt_session"


@dataclass
class DashboardSession:
    principal: Principal
    csrf_token: str
    expires_at: float
    notice: str | None = None
    sign_out_url: str | None = None  # the identity provider's logout, for a single sign-on session

    def csrf_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.csrf_token.encode())

    def take_notice(self) -> str | None:
        notice, self.notice = self.notice, None
        return notice


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    def __init__(self, ttl_s: float, max_sessions: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: dict[str, DashboardSession] = {}  # insertion order = opening order

    def open(self, principal: Principal, sign_out_url: str | None = None) -> tuple[str, DashboardSession]:
        """A new session for a principal who just signed in: (cookie value, session)."""
        while len(self._sessions) >= self.max_sessions:
            del self._sessions[next(iter(self._sessions))]
        session_id = secrets.token_urlsafe(32)
        session = DashboardSession(
            principal=principal,
            csrf_token=secrets.token_urlsafe(32),
            expires_at=self._clock() + self.ttl_s,
            sign_out_url=sign_out_url,
        )
        self._sessions[_key(session_id)] = session
        return session_id, session

    def find(self, session_id: str | None) -> DashboardSession | None:
        if not session_id:
            return None
        key = _key(session_id)
        session = self._sessions.get(key)
        if session is not None and session.expires_at <= self._clock():
            del self._sessions[key]
            return None
        return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(_key(session_id), None)
