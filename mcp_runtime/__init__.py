"""The MCP control plane of the runtime: tools, auth -> principal, RBAC, CLI, settings.

Owns everything a client talks to. Must not contain runtime behaviour: each tool
authenticates, authorizes, captures the snapshot, calls one runtime_core service and
shapes the answer.
"""

from mcp_runtime._backend import ToolBackend
from mcp_runtime._config import (
    DEFAULT_PIPELINES_DIR,
    DEFAULT_RBAC_MODEL,
    DEFAULT_RBAC_POLICY,
    ServerConfig,
    default_server_config,
    load_server_config,
)
from mcp_runtime._guard import AuthenticationRequiredError, BearerPrincipal, FixedPrincipal, ToolGuard
from mcp_runtime._http_limits import MAX_REQUEST_BYTES, RequestSizeLimitMiddleware
from mcp_runtime._permissions import TOOL_PERMISSIONS, Permission
from mcp_runtime._rbac import Authorizer, InsufficientScopeError, PermissionDeniedError
from mcp_runtime._serve import ServeOptions, serve
from mcp_runtime._server import HttpAuth, build_server, http_app
from mcp_runtime.auth import (
    AccessAudit,
    ApiKeyHeaderMiddleware,
    BearerVerifier,
    ConfiguredTokenVerifier,
    OAuthSettings,
    Principal,
    PrincipalConfig,
    hash_token,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Server
    "build_server",
    "http_app",
    "HttpAuth",
    "serve",
    "ServeOptions",
    "ToolBackend",
    "RequestSizeLimitMiddleware",
    "MAX_REQUEST_BYTES",
    # Configuration
    "ServerConfig",
    "PrincipalConfig",
    "OAuthSettings",
    "default_server_config",
    "load_server_config",
    "DEFAULT_PIPELINES_DIR",
    "DEFAULT_RBAC_MODEL",
    "DEFAULT_RBAC_POLICY",
    # Authentication
    "Principal",
    "ConfiguredTokenVerifier",
    "BearerVerifier",
    "AccessAudit",
    "ApiKeyHeaderMiddleware",
    "hash_token",
    "AuthenticationRequiredError",
    "ToolGuard",
    "FixedPrincipal",
    "BearerPrincipal",
    # Authorization
    "Authorizer",
    "Permission",
    "PermissionDeniedError",
    "InsufficientScopeError",
    "TOOL_PERMISSIONS",
]
