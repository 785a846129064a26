"""Observability that leaves the process: Prometheus exposition and OpenTelemetry traces.

Owns the metrics exposition of one process (`MetricsExposition`: its registry rendered as
Prometheus text, scrape-time gauges cached briefly, the `/metrics` starlette route / app), the
capacity gauges of the instances a process hosts, the operator's observability settings,
tracing setup from the standard OTEL_* variables (off, and free, unless they ask for it),
the run's trace context carried from submit to every dispatch and step (`RunTraceContext`),
W3C propagation through HTTP headers / gRPC metadata, and the runtime's spans (dispatch,
command receipt, step, `invoke_workflow`). Must not import MCP: the MCP request spans and the
`mcp.server.operation.duration` histogram live in `mcp_runtime.observability`.
"""

from runtime_core.observability._capacity import CapacitySource, capacity_gauges
from runtime_core.observability._context import (
    TRACE_CONTEXT_KEY,
    RunTraceContext,
    allocate_run_trace,
    extract_context,
    inject_context,
)
from runtime_core.observability._exposition import (
    METRICS_ENDPOINT_KEY,
    METRICS_PATH,
    SD_PATH,
    MetricsExposition,
    metrics_app,
    metrics_endpoint,
    metrics_route,
    sd_target_groups,
)
from runtime_core.observability._gauges import (
    DEFAULT_GAUGE_TTL_S,
    CachedGauges,
    GaugeFamily,
    GaugeReader,
    GaugeValues,
)
from runtime_core.observability._ids import PinnableIdGenerator, new_span_id, new_trace_id, pinned_ids
from runtime_core.observability._settings import (
    CACHE_SECONDS_VARIABLE,
    TENANT_LABELS_VARIABLE,
    ObservabilitySettings,
)
from runtime_core.observability._spans import (
    WorkflowSpanObserver,
    command_span,
    dispatch_span,
    end_unexecuted_run_span,
    run_trace_of,
)
from runtime_core.observability._step_spans import OtelStepTracing
from runtime_core.observability._tracing import (
    TRACER_NAME,
    TracingConfigError,
    configure_tracing,
    install_tracer_provider,
    requested_exporters,
    runtime_tracer,
    shutdown_tracing,
    tracer_provider,
    tracing_enabled,
    tracing_with,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Settings
    "ObservabilitySettings",
    "TENANT_LABELS_VARIABLE",
    "CACHE_SECONDS_VARIABLE",
    # Metrics exposition
    "MetricsExposition",
    "METRICS_PATH",
    "metrics_app",
    "metrics_endpoint",
    "metrics_route",
    "METRICS_ENDPOINT_KEY",
    "SD_PATH",
    "sd_target_groups",
    "CachedGauges",
    "GaugeFamily",
    "GaugeReader",
    "GaugeValues",
    "DEFAULT_GAUGE_TTL_S",
    "capacity_gauges",
    "CapacitySource",
    # Tracing setup
    "configure_tracing",
    "shutdown_tracing",
    "install_tracer_provider",
    "tracing_with",
    "tracing_enabled",
    "runtime_tracer",
    "tracer_provider",
    "requested_exporters",
    "TracingConfigError",
    "TRACER_NAME",
    "PinnableIdGenerator",
    "pinned_ids",
    "new_span_id",
    "new_trace_id",
    # Trace context and propagation
    "RunTraceContext",
    "TRACE_CONTEXT_KEY",
    "allocate_run_trace",
    "inject_context",
    "extract_context",
    # Spans
    "dispatch_span",
    "command_span",
    "OtelStepTracing",
    "WorkflowSpanObserver",
    "end_unexecuted_run_span",
    "run_trace_of",
]
