"""Who is using the dashboard, and the gate every page and action goes through.

Owns logging in with a configured token (checked by the same verifier as bearer tokens;
the token itself is never kept), finding the session's principal on each request, and
admitting that principal for a tool's permission through the tool guard (`admit_as`): a
page or an action needs exactly what the tool doing the same needs, and the snapshot it
gives carries the principal's tenant into every runtime_core call. Must not call the runtime.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

from starlette.requests import Request

from mcp_runtime._config import ServerConfig
from mcp_runtime._guard import ToolGuard
from mcp_runtime._principal import Principal
from mcp_runtime._tokens import ConfiguredTokenVerifier
from mcp_runtime.dashboard._sessions import SESSION_COOKIE, DashboardSession, SessionStore
from runtime_core.identity import ExecutionContextSnapshot

log = logging.getLogger("mcp_runtime.dashboard")


@dataclass(frozen=True)
class DashboardUser:
    principal: Principal
    session: DashboardSession
    guard: ToolGuard

    def admit(self, tool_name: str) -> ExecutionContextSnapshot:
        """The tool's permission is required (PermissionDeniedError otherwise); the call's snapshot."""
        context_key = f"ui:{tool_name}:{secrets.token_hex(6)}"
        return self.guard.admit_as(self.principal, tool_name, context_key=context_key)

    def may(self, tool_name: str) -> bool:
        return self.guard.permits(self.principal, tool_name)


class DashboardAccess:
    def __init__(
        self,
        config: ServerConfig,
        verifier: ConfiguredTokenVerifier,
        guard: ToolGuard,
        sessions: SessionStore,
    ) -> None:
        self.config = config
        self.verifier = verifier
        self.guard = guard
        self.sessions = sessions

    def login(self, token: str) -> tuple[str, DashboardSession] | None:
        """A new session when the token is configured for a principal, else None."""
        name = self.verifier.principal_name_for(token)
        if name is None:
            log.info("ui.login_refused")
            return None
        opened = self.sessions.open(name)
        principal = self.config.principal(name)
        log.info("ui.login", extra={"principal": name, "tenant_id": principal.tenant_id})
        return opened

    def logout(self, request: Request) -> None:
        self.sessions.close(request.cookies.get(SESSION_COOKIE))

    def user(self, request: Request) -> DashboardUser | None:
        session = self.sessions.find(request.cookies.get(SESSION_COOKIE))
        if session is None or session.principal_name not in self.config.principals:
            return None
        return DashboardUser(self.config.principal(session.principal_name), session, self.guard)
