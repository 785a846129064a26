"""MCP-side observability: request spans (on top of the SDK's) and the operation-duration metric.

Owns `McpTelemetryMiddleware` (the OpenTelemetry MCP semantic-convention attributes the SDK's
span lacks, and `mcp_server_operation_duration_seconds`) and `McpOperationMetrics`. The
metrics exposition, tracing setup and the runtime's spans are `runtime_core.observability`'s.
Must not contain tool behaviour.
"""

from mcp_runtime.observability._middleware import McpTelemetryMiddleware
from mcp_runtime.observability._operation_metrics import (
    KNOWN_METHODS,
    OPERATION_BUCKETS,
    OTHER,
    McpOperationMetrics,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Spans and metrics of MCP requests
    "McpTelemetryMiddleware",
    "McpOperationMetrics",
    "KNOWN_METHODS",
    "OPERATION_BUCKETS",
    "OTHER",
]
