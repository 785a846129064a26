"""Who is using the dashboard, and the gate every page and action goes through.

Owns logging in with a configured static token (checked by the same verifier as bearer
tokens; the token itself is never kept) or through single sign-on (`_sso`), finding the
session's principal on each request (its authentication recorded as `session`), and
admitting that principal for a tool's permission through the tool guard (`admit_as`): a
page or an action needs exactly what the tool doing the same needs, and the snapshot it
gives carries the principal's tenant into every runtime_core call. Must not call the runtime.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

from starlette.requests import Request

from mcp_runtime._guard import ToolGuard
from mcp_runtime.auth import AccessAudit, AuthMethod, BearerVerifier, Principal, RefusalReason
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
    def __init__(self, verifier: BearerVerifier, guard: ToolGuard, sessions: SessionStore) -> None:
        self.verifier = verifier
        self.guard = guard
        self.sessions = sessions

    @property
    def audit(self) -> AccessAudit:
        return self.guard.audit

    def login(self, token: str) -> tuple[str, DashboardSession] | None:
        """A new session when the token is configured for a static principal, else None."""
        principal = self.verifier.static.principal_for_token(token)
        if principal is None:
            self.audit.refused(RefusalReason.UNKNOWN_TOKEN, status=401, path="/ui/login")
            return None
        return self.open_session(principal)

    def open_session(
        self, principal: Principal, sign_out_url: str | None = None
    ) -> tuple[str, DashboardSession]:
        auth = principal.authentication
        in_session = principal.model_copy(
            update={
                "authentication": auth.model_copy(update={"method": AuthMethod.SESSION}) if auth else None
            }
        )
        log.info(
            "ui.login",
            extra={
                "principal": principal.name,
                "tenant_id": principal.tenant_id,
                "auth_method": auth.method.value if auth else None,
                "issuer": auth.issuer if auth else None,
            },
        )
        return self.sessions.open(in_session, sign_out_url)

    def logout(self, request: Request) -> None:
        self.sessions.close(request.cookies.get(SESSION_COOKIE))

    def user(self, request: Request) -> DashboardUser | None:
        session = self.sessions.find(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        return DashboardUser(session.principal, session, self.guard)
