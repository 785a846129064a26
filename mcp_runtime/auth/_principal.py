"""The authenticated caller (a principal), how it authenticated, and the snapshot it stamps on every call.

Owns the Principal model (tenant, roles, namespaces; for an OAuth caller also the permissions its
token's scopes grant), the Authentication record (method, issuer, subject, token id: never the token
itself), the configured static principal with its token digests, and the one place that turns a
principal into an ExecutionContextSnapshot. Must not hold credentials: token hashes stay in the
configuration, never on a principal.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime_core.identity import ExecutionContextSnapshot

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class AuthMethod(StrEnum):
    CONFIGURED = "configured"  # stdio / in-process: the principal named in the configuration
    STATIC_TOKEN = "static_token"  # a bearer token whose sha256 digest is configured
    OAUTH = "oauth"  # an access token of a trusted issuer (JWT or introspected)
    SESSION = "session"  # a dashboard session opened by one of the above


class Authentication(BaseModel):
    """How the caller proved who it is: recorded on the snapshot, never the token itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: AuthMethod
    issuer: str | None = None
    subject: str | None = None
    token_id: str | None = Field(None, description="the token's `jti`, when it has one")
    client_id: str | None = None


class Identity(BaseModel):
    """The fields a principal and its configuration share: who, in which tenant, with which roles."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    tenant_id: str
    tenant_group_id: str | None = None
    roles: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    current_namespace: str | None = None
    project: str = ""


class Principal(Identity):
    """Who is calling: tenant, roles and namespaces, and how that was established.

    `scope_permissions` is None when nothing narrows the roles (static tokens, stdio); for an
    OAuth caller it is the set of `object:action` permissions its token's scopes grant, and a
    call needs both a role and a scope allowing it.
    """

    name: str
    authentication: Authentication | None = None
    scopes: tuple[str, ...] = ()
    scope_permissions: frozenset[str] | None = None

    def scopes_permit(self, permission: str) -> bool:
        return self.scope_permissions is None or permission in self.scope_permissions

    def snapshot(self, context_key: str) -> ExecutionContextSnapshot:
        """Capture this principal as the frozen context carried by every hop of one call."""
        auth = self.authentication
        return ExecutionContextSnapshot(
            context_key=context_key,
            project=self.project,
            user_id=self.user_id,
            tenant_id=self.tenant_id,
            tenant_group_id=self.tenant_group_id,
            current_namespace=self.current_namespace,
            namespaces=self.namespaces,
            roles=self.roles,
            auth_method=auth.method.value if auth else None,
            auth_issuer=auth.issuer if auth else None,
            auth_subject=auth.subject if auth else None,
            auth_jti=auth.token_id if auth else None,
        )


class PrincipalConfig(Identity):
    """One principal as written in the configuration file (static: stdio, service accounts, CI)."""

    token_sha256: tuple[str, ...] = Field(
        (), description="sha256 hex digests of the bearer tokens / API keys of this principal"
    )

    @field_validator("token_sha256")
    @classmethod
    def _digests_only(cls, digests: tuple[str, ...]) -> tuple[str, ...]:
        return cls.digests_only(digests)

    @staticmethod
    def digests_only(digests: tuple[str, ...]) -> tuple[str, ...]:
        """The digests, or ValueError when one is not a sha256 hex digest (a plain token)."""
        for digest in digests:
            if not _SHA256_HEX.match(digest):
                raise ValueError(
                    "token_sha256 entries must be sha256 hex digests; "
                    "run `mcp-runtime hash-token` and store its output, never the token"
                )
        return digests

    def to_principal(self, name: str, method: AuthMethod = AuthMethod.CONFIGURED) -> Principal:
        return Principal(
            name=name,
            authentication=Authentication(method=method, subject=name),
            **self.model_dump(exclude={"token_sha256"}),
        )
