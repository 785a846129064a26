"""The `oauth` section of the server configuration: this resource and the issuers it trusts.

Owns the configuration models of the OAuth 2.1 resource server (the resource URI, clock skew,
key-refresh bounds, the scopes file), of each trusted issuer (algorithm allow-list, audience,
optional `typ` `at+jwt`, claim paths or a static tenant, role names, optional RFC 7662
introspection, optional dashboard sign-in client) and their validation. Secrets appear only as
the names of environment variables. Must not fetch anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from mcp_runtime.auth._scopes import DEFAULT_SCOPES_FILE

# Asymmetric JWS algorithms only: `none` and the HMAC family (a shared secret, which a public
# JWKS key must never become) are refused at load time.
SUPPORTED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
DEFAULT_ALGORITHMS = ("RS256", "PS256", "ES256")

ClaimPath = str | tuple[str, ...]
"""A claim path: dotted (`realm_access.roles`) or the list of its keys (for keys holding dots,
such as `["https://example.com/claims", "tenant"]`). A list value on the way is searched
element by element; a numeric key indexes a list."""

NonEmpty = Annotated[str, StringConstraints(min_length=1)]


class ClaimPaths(BaseModel):
    """Where the principal's fields sit in the token's claims (or an introspection answer)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: ClaimPath = "sub"
    tenant_id: ClaimPath | None = None
    tenant_group_id: ClaimPath | None = None
    roles: ClaimPath | None = None
    namespaces: ClaimPath | None = None
    current_namespace: ClaimPath | None = None
    scopes: ClaimPath = Field("scope", description="`scope` (RFC 9068, space-separated) or `scp` (Entra)")


class IntrospectionSettings(BaseModel):
    """RFC 7662 token introspection for opaque (non-JWT) access tokens of this issuer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str | None = Field(None, description="default: the issuer metadata's introspection_endpoint")
    client_id: NonEmpty
    client_secret_env: NonEmpty = Field(description="the environment variable holding the client secret")
    cache_s: float = Field(30.0, ge=0, le=300, description="how long an active answer is reused")

    def client_secret(self) -> str:
        secret = os.environ.get(self.client_secret_env)
        if not secret:
            raise ValueError(
                f"introspection needs the client secret in ${self.client_secret_env}: set that variable"
            )
        return secret


class DashboardClientSettings(BaseModel):
    """The dashboard as an OIDC client of this issuer (authorization code + PKCE)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    client_id: NonEmpty
    client_secret_env: str | None = Field(None, description="unset: a public client (PKCE only)")
    display_name: str = ""
    scopes: tuple[str, ...] = ("openid", "profile")

    def client_secret(self) -> str | None:
        if self.client_secret_env is None:
            return None
        secret = os.environ.get(self.client_secret_env)
        if not secret:
            raise ValueError(f"dashboard sign-in needs the client secret in ${self.client_secret_env}")
        return secret


class IssuerSettings(BaseModel):
    """One trusted authorization server and how its tokens become principals."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    issuer: NonEmpty = Field(description="the exact `iss` of its tokens and of its RFC 8414 / OIDC metadata")
    metadata_url: str | None = Field(None, description="default: discovered from the issuer URL")
    jwks_uri: str | None = Field(None, description="default: the metadata's jwks_uri")
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    audience: tuple[str, ...] | None = Field(
        None, description="accepted `aud` values; default: this server's resource URI (RFC 8707)"
    )
    require_at_jwt: bool = Field(False, description="require the JWT header `typ` at+jwt (RFC 9068)")
    claims: ClaimPaths = ClaimPaths()
    static_tenant_id: str | None = Field(None, description="every token of this issuer is of this tenant")
    static_tenant_group_id: str | None = None
    role_map: dict[str, tuple[str, ...]] | None = Field(
        None, description="issuer role -> casbin role(s); when set, unmapped issuer roles are dropped"
    )
    default_roles: tuple[str, ...] = Field((), description="roles every token of this issuer has")
    require_scopes: bool = Field(
        True, description="a token without a scope claim gets no permission; false: its roles alone decide"
    )
    introspection: IntrospectionSettings | None = None
    dashboard: DashboardClientSettings | None = None

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, algorithms: tuple[str, ...]) -> tuple[str, ...]:
        unsupported = [alg for alg in algorithms if alg not in SUPPORTED_ALGORITHMS]
        if unsupported or not algorithms:
            raise ValueError(
                f"algorithms {unsupported or '[]'} are not allowed: use asymmetric ones among "
                f"{sorted(SUPPORTED_ALGORITHMS)} (never none or HS*)"
            )
        return algorithms

    @field_validator("role_map", mode="before")
    @classmethod
    def _role_lists(cls, value: object) -> object:
        if isinstance(value, dict):
            return {key: (roles,) if isinstance(roles, str) else roles for key, roles in value.items()}
        return value

    @model_validator(mode="after")
    def _one_tenant_source(self) -> IssuerSettings:
        if (self.claims.tenant_id is None) == (self.static_tenant_id is None):
            raise ValueError(
                f"issuer {self.issuer}: set exactly one of claims.tenant_id (a claim path) "
                "and static_tenant_id"
            )
        if self.static_tenant_group_id is not None and self.claims.tenant_group_id is not None:
            raise ValueError(
                f"issuer {self.issuer}: set at most one of claims.tenant_group_id and static_tenant_group_id"
            )
        return self


class OAuthSettings(BaseModel):
    """This server as an OAuth 2.1 resource server (RFC 9728) trusting one or more issuers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: NonEmpty = Field(
        description="this server's MCP endpoint as clients reach it, e.g. https://mcp.example.com/mcp"
    )
    resource_name: str = "mcp-runtime"
    issuers: tuple[IssuerSettings, ...] = Field(min_length=1)
    clock_skew_s: float = Field(60, ge=0, le=600, description="leeway on exp / nbf / iat")
    jwks_min_refresh_interval_s: float = Field(
        30, ge=0, description="an unknown `kid` refreshes an issuer's keys at most this often"
    )
    jwks_max_age_s: float = Field(
        3600, gt=0, description="keys older than this are refreshed in the background"
    )
    http_timeout_s: float = Field(
        5, gt=0, le=60, description="per request to an issuer (metadata, keys, introspection)"
    )
    scopes_file: Path = DEFAULT_SCOPES_FILE

    @field_validator("resource")
    @classmethod
    def _absolute_url(cls, resource: str) -> str:
        parts = urlsplit(resource)
        if parts.scheme not in ("https", "http") or not parts.netloc or parts.fragment:
            raise ValueError(
                "resource must be an absolute http(s) URL without a fragment, e.g. https://host/mcp"
            )
        return resource

    @model_validator(mode="after")
    def _distinct_issuers(self) -> OAuthSettings:
        names = [issuer.issuer for issuer in self.issuers]
        if len(set(names)) != len(names):
            raise ValueError("each issuer may be listed once")
        return self

    def missing_secrets(self) -> list[str]:
        """The environment variables named for client secrets that are unset (checked at start-up)."""
        named = [
            name
            for issuer in self.issuers
            for name in (
                issuer.introspection.client_secret_env if issuer.introspection else None,
                issuer.dashboard.client_secret_env if issuer.dashboard else None,
            )
            if name
        ]
        return [name for name in named if not os.environ.get(name)]

    @property
    def origin(self) -> str:
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}"

    def audiences(self, issuer: IssuerSettings) -> tuple[str, ...]:
        return issuer.audience or (self.resource,)
