"""MCP servers' tools as steps: the runtime as an MCP client (the `mcp.tool` step).

A tenant's MCP servers are configured in the providers file under `mcp_servers.<tenant>.<name>`
(streamable HTTP with headers / OAuth client credentials from the environment, or stdio servers
the runtime starts itself; allowed tools, timeouts, `idempotent`). A `mcp.tool` step names a
server and a tool; the run's ExecutionContextSnapshot decides whose servers it may use (another
tenant's server answers exactly like an unknown one). Arguments come from the step's bindings
and are checked against the tool's input schema at submit (when the server answers) and before
the call; the call carries its operation id in `_meta` and goes through
`runtime_core.steps.operations.guarded_call`; `structuredContent` is the result; `isError` and
protocol errors are typed failures. This is the one place runtime_core imports the MCP SDK.
Must not serve MCP (mcp_runtime does) nor decide retries (the engine's retry policy does).
"""

from runtime_core.steps.mcp_tool._connection import McpConnection, SessionUnavailable
from runtime_core.steps.mcp_tool._executor import McpToolConfig, McpToolExecutor
from runtime_core.steps.mcp_tool._servers import McpServerListing, McpServers, McpToolDescription
from runtime_core.steps.mcp_tool._settings import (
    OPERATION_META_KEY,
    McpHttpServer,
    McpServerSettings,
    McpStdioServer,
    OAuthClientCredentials,
    TenantMcpServers,
    secret_variables,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # The step
    "McpToolExecutor",
    "McpToolConfig",
    # Servers by tenant, and what steps.list shows of them
    "McpServers",
    "McpServerListing",
    "McpToolDescription",
    "McpConnection",
    "SessionUnavailable",
    # Providers-file entries
    "McpServerSettings",
    "McpHttpServer",
    "McpStdioServer",
    "OAuthClientCredentials",
    "TenantMcpServers",
    "OPERATION_META_KEY",
    "secret_variables",
]
