"""MCP server entries of the providers file: which servers each tenant's runs may call, and how.

Owns the fields of an `mcp_servers.<tenant>.<name>` entry (snake_case like the rest of the
providers file): streamable HTTP (`url`, plain `headers`, `headers_from_env`, `bearer_token_env`,
OAuth client credentials with the secret's variable) or stdio (a command the runtime starts itself, its
`env_from_env`), the tools runs may call (`allowed_tools`), timeouts, whether the server
deduplicates calls by the operation id it gets in `_meta` (`idempotent`), and the `_meta` key
that carries it. Secrets are never fields: an entry names the environment variables that
hold them. Must not open connections.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime_core.steps._http_endpoint import absolute_http_url

OPERATION_META_KEY = "mcp-runtime/operationId"
"""The `_meta` key under which a tool call carries its operation id (per-entry `operation_meta_key`)."""

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class OAuthClientCredentials(BaseModel):
    """OAuth 2.1 client credentials grant: the token comes from the server's authorization server."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    client_id: str = Field(min_length=1)
    client_secret_env: str = Field(min_length=1)
    issuer: str | None = None
    scopes: list[str] = []


class _McpServerEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_tools: list[str] | None = None
    connect_timeout_s: float = Field(default=10.0, gt=0)
    call_timeout_s: float = Field(default=60.0, gt=0)
    list_ttl_s: float = Field(default=60.0, ge=0)
    idempotent: bool = False
    operation_meta_key: str = Field(default=OPERATION_META_KEY, min_length=1)

    def allows(self, tool: str) -> bool:
        return self.allowed_tools is None or tool in self.allowed_tools


class McpHttpServer(_McpServerEntry):
    """A streamable HTTP MCP endpoint (`url`, e.g. `https://tools.example.com/mcp`)."""

    transport: Literal["http"]
    url: str
    headers: dict[str, str] = {}
    headers_from_env: dict[str, str] = {}
    bearer_token_env: str | None = Field(default=None, min_length=1)
    oauth: OAuthClientCredentials | None = None

    @field_validator("url")
    @classmethod
    def _absolute_http_url(cls, value: str) -> str:
        return absolute_http_url(value, "url")


class McpStdioServer(_McpServerEntry):
    """A server the runtime starts itself and talks to over stdin / stdout."""

    transport: Literal["stdio"]
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}
    env_from_env: dict[str, str] = {}
    cwd: str | None = None


McpServerSettings = Annotated[McpHttpServer | McpStdioServer, Field(discriminator="transport")]

TenantMcpServers = dict[Annotated[str, Field(pattern=_NAME)], McpServerSettings]
"""One tenant's servers by name."""


def secret_variables(entry: McpHttpServer | McpStdioServer) -> list[tuple[str, str]]:
    """`(field, VARIABLE)` for every environment variable the entry reads (names, never values)."""
    if isinstance(entry, McpStdioServer):
        return [(f"env_from_env.{name}", variable) for name, variable in sorted(entry.env_from_env.items())]
    found = [(f"headers_from_env.{h}", v) for h, v in sorted(entry.headers_from_env.items())]
    if entry.bearer_token_env is not None:
        found.append(("bearer_token_env", entry.bearer_token_env))
    if entry.oauth is not None:
        found.append(("oauth.client_secret_env", entry.oauth.client_secret_env))
    return found
