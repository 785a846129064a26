"""Identity: who is calling, proven how (static tokens, OAuth 2.1 access tokens), and the audit of refusals.

Owns the principal and its authentication record, static hashed tokens (service accounts, stdio,
CI), the OAuth 2.1 resource server (RFC 9728 metadata, 401 / 403 challenges), access-token
verification against trusted issuers (JWKS via PyJWT, RFC 7662 introspection), claims -> tenant
and roles, scopes that narrow roles, and the audit of every refusal. Must not authorize tool calls
(casbin in `mcp_runtime._rbac` does) nor call the runtime.
"""

from mcp_runtime.auth._audit import ACCESS_REFUSED_EVENT, AccessAudit, refusal_counter
from mcp_runtime.auth._claims import principal_from_claims, resolve
from mcp_runtime.auth._introspection import Introspector
from mcp_runtime.auth._issuer_keys import IssuerKeys, IssuerMetadata, IssuerUnavailableError, key_fits
from mcp_runtime.auth._jwt import JwtVerifier, looks_like_jwt, verify_signed
from mcp_runtime.auth._oidc import DashboardSso, SignedIn, SignInError, SsoProvider
from mcp_runtime.auth._principal import Authentication, AuthMethod, Principal, PrincipalConfig
from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._resource_server import (
    PROTECTED_RESOURCE_PATH,
    ResourceServerMiddleware,
    ScopeCheck,
    challenge,
    protected_resource_metadata,
    protected_resource_routes,
)
from mcp_runtime.auth._scopes import DEFAULT_SCOPES_FILE, ScopeMap
from mcp_runtime.auth._settings import (
    DEFAULT_ALGORITHMS,
    SUPPORTED_ALGORITHMS,
    ClaimPaths,
    DashboardClientSettings,
    IntrospectionSettings,
    IssuerSettings,
    OAuthSettings,
)
from mcp_runtime.auth._static_tokens import ApiKeyHeaderMiddleware, ConfiguredTokenVerifier, hash_token
from mcp_runtime.auth._token_gate import TokenGate
from mcp_runtime.auth._verifier import AuthenticatedCaller, BearerVerifier, OAuthVerifier, PrincipalUser

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Principals
    "Principal",
    "PrincipalConfig",
    "Authentication",
    "AuthMethod",
    # Static tokens
    "hash_token",
    "ConfiguredTokenVerifier",
    "ApiKeyHeaderMiddleware",
    "TokenGate",
    # OAuth settings
    "OAuthSettings",
    "IssuerSettings",
    "ClaimPaths",
    "IntrospectionSettings",
    "DashboardClientSettings",
    "DEFAULT_ALGORITHMS",
    "SUPPORTED_ALGORITHMS",
    "ScopeMap",
    "DEFAULT_SCOPES_FILE",
    # Verification
    "BearerVerifier",
    "OAuthVerifier",
    "AuthenticatedCaller",
    "PrincipalUser",
    "JwtVerifier",
    "looks_like_jwt",
    "verify_signed",
    "IssuerKeys",
    "IssuerMetadata",
    "IssuerUnavailableError",
    "key_fits",
    "Introspector",
    "principal_from_claims",
    "resolve",
    "RefusalReason",
    "TokenRefusedError",
    # Resource server
    "ResourceServerMiddleware",
    "ScopeCheck",
    "challenge",
    "protected_resource_metadata",
    "protected_resource_routes",
    "PROTECTED_RESOURCE_PATH",
    # Dashboard single sign-on
    "DashboardSso",
    "SsoProvider",
    "SignedIn",
    "SignInError",
    # Audit
    "AccessAudit",
    "ACCESS_REFUSED_EVENT",
    "refusal_counter",
]
