"""`mcp.server.operation.duration` as a Prometheus histogram, with bounded label values.

Owns `McpOperationMetrics`: the histogram `mcp_server_operation_duration_seconds` with the
OpenTelemetry MCP metric's labels (`mcp_method_name`, `gen_ai_tool_name`, `error_type`) and
bucket boundaries, one per metrics registry, and the rule that keeps label values
low-cardinality: a method or tool name this server does not serve is recorded as `_OTHER`
(a client can send any string), and `error_type` is one of a JSON-RPC error code,
`tool_error` or an exception class name. Errors by tool are the `_count` series with a
non-empty `error_type`. Must not record ids, arguments or results.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from mcp_types.methods import SPEC_CLIENT_METHODS, SPEC_CLIENT_NOTIFICATION_METHODS
from prometheus_client import CollectorRegistry, Histogram

OTHER = "_OTHER"
# The OpenTelemetry MCP semantic conventions' advice for mcp.server.operation.duration.
OPERATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
# Spec methods plus the Tasks methods, which the SDK leaves to servers to bind.
KNOWN_METHODS = frozenset(
    {
        *SPEC_CLIENT_METHODS,
        *SPEC_CLIENT_NOTIFICATION_METHODS,
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "tasks/update",
    }
)

_by_registry: WeakKeyDictionary[CollectorRegistry, McpOperationMetrics] = WeakKeyDictionary()


class McpOperationMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            "mcp_server_operation_duration_seconds",
            "MCP request or notification duration as observed by the server (mcp.server.operation.duration).",
            ["mcp_method_name", "gen_ai_tool_name", "error_type"],
            buckets=OPERATION_BUCKETS,
            registry=registry,
        )

    @classmethod
    def of(cls, registry: CollectorRegistry) -> McpOperationMetrics:
        """The histogram of `registry` (created on first use: one per registry)."""
        metrics = _by_registry.get(registry)
        if metrics is None:
            metrics = _by_registry[registry] = cls(registry)
        return metrics

    def observe(
        self, method: str, tool: str | None, error_type: str, seconds: float, *, tools: frozenset[str]
    ) -> None:
        self.duration.labels(
            mcp_method_name=method if method in KNOWN_METHODS else OTHER,
            gen_ai_tool_name=(tool if tool in tools else OTHER) if tool is not None else "",
            error_type=error_type,
        ).observe(seconds)
