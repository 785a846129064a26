"""The MCP servers of each tenant, as configured, and the sessions this process holds to them.

Owns resolving `(tenant, server)` to the tenant's own entry (another tenant's server answers
exactly like an unknown one: only the run's tenant's entries are ever looked at), one pooled
connection per tenant entry, the tools a run may call (the server's, narrowed by
`allowed_tools`) and their description for `steps.list`. Must not decide anything about a
call's outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mcp.types import Tool
from pydantic import BaseModel, ConfigDict

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.mcp_tool._connection import McpConnection, SessionUnavailable
from runtime_core.steps.mcp_tool._failures import unreachable
from runtime_core.steps.mcp_tool._settings import McpHttpServer, McpStdioServer, TenantMcpServers

log = logging.getLogger("runtime_core.steps.mcp_tool")

McpEntry = McpHttpServer | McpStdioServer


class McpToolDescription(BaseModel):
    """One tool a tenant's runs may call as a `mcp.tool` step (`steps.list`)."""

    model_config = ConfigDict(frozen=True)

    server: str
    tool: str
    title: str | None = None
    description: str = ""
    input_schema: dict[str, object] = {}
    read_only: bool | None = None
    idempotent: bool | None = None


class McpServerListing(BaseModel):
    """A tenant's server and its callable tools; `error` when it could not be listed now."""

    model_config = ConfigDict(frozen=True)

    server: str
    transport: str
    tools: list[McpToolDescription] = []
    error: str | None = None


class McpServers:
    def __init__(self, configured: Mapping[str, TenantMcpServers] | None = None) -> None:
        self._configured = {tenant: dict(entries) for tenant, entries in (configured or {}).items()}
        self._connections: dict[tuple[str, str], McpConnection] = {}

    def names(self, tenant_id: str | None) -> list[str]:
        return sorted(self._configured.get(tenant_id or "", {}))

    def entry(self, tenant_id: str | None, server: str) -> McpEntry | None:
        return self._configured.get(tenant_id or "", {}).get(server)

    def unknown_message(self, tenant_id: str | None, server: str) -> str:
        """The same words for a server no tenant has and for another tenant's server."""
        known = ", ".join(self.names(tenant_id)) or "none"
        return f"no MCP server {server!r} is configured for this run's tenant (configured: {known})"

    def resolve(self, tenant_id: str | None, server: str) -> McpEntry:
        entry = self.entry(tenant_id, server)
        if entry is None:
            raise StepFailure(self.unknown_message(tenant_id, server), code="permanent")
        return entry

    def connection(self, tenant_id: str, server: str) -> McpConnection:
        key = (tenant_id, server)
        connection = self._connections.get(key)
        if connection is None:
            connection = McpConnection(f"{tenant_id}/{server}", self.resolve(tenant_id, server))
            self._connections[key] = connection
        return connection

    async def tools(self, tenant_id: str, server: str) -> list[Tool]:
        """The server's tools this tenant's runs may call; StepFailure (transient) when unreachable."""
        entry = self.resolve(tenant_id, server)
        try:
            offered = await self.connection(tenant_id, server).list_tools()
        except SessionUnavailable as error:
            raise unreachable(server, error.__cause__ or error) from None
        except StepFailure:
            raise
        except Exception as error:
            raise unreachable(server, error) from None
        return [tool for tool in offered if entry.allows(tool.name)]

    async def listing(self, tenant_id: str) -> list[McpServerListing]:
        """Each of the tenant's servers with the tools its runs may call (unreachable ones with `error`)."""
        listings = []
        for server in self.names(tenant_id):
            entry = self.resolve(tenant_id, server)
            try:
                tools = [_describe(server, tool) for tool in await self.tools(tenant_id, server)]
            except StepFailure as failure:
                log.warning(
                    "mcp_tool.list_failed server=%s", server, extra={"tenant_id": tenant_id, "server": server}
                )
                listings.append(
                    McpServerListing(server=server, transport=entry.transport, error=failure.message)
                )
                continue
            listings.append(McpServerListing(server=server, transport=entry.transport, tools=tools))
        return listings

    async def aclose(self) -> None:
        for connection in self._connections.values():
            await connection.aclose()
        self._connections.clear()


def _describe(server: str, tool: Tool) -> McpToolDescription:
    hints = tool.annotations
    return McpToolDescription(
        server=server,
        tool=tool.name,
        title=tool.title,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        read_only=hints.read_only_hint if hints else None,
        idempotent=hints.idempotent_hint if hints else None,
    )
