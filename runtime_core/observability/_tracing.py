"""Tracing setup: one OpenTelemetry SDK pipeline per process, driven by the standard OTEL_* variables.

Owns deciding whether tracing is on (off unless `OTEL_TRACES_EXPORTER` names an exporter or an
OTLP endpoint is set; `OTEL_SDK_DISABLED=true` wins), building the TracerProvider (resource from
`OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`, sampler from `OTEL_TRACES_SAMPLER`, OTLP/HTTP
protobuf export batched by `OTEL_BSP_*`, endpoint / headers / timeout from
`OTEL_EXPORTER_OTLP_*`), the tracer the runtime's own spans use, and flushing at shutdown.
With tracing off nothing is built: no provider, no exporter thread, and `tracing_enabled()` is
the only check the instrumented paths make. Must not create spans itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from runtime_core.errors import RuntimeCoreError
from runtime_core.observability._ids import PinnableIdGenerator

log = logging.getLogger("runtime_core.observability")

TRACER_NAME = "mcp-runtime"
SUPPORTED_PROTOCOL = "http/protobuf"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class TracingConfigError(RuntimeCoreError):
    """The OTEL_* variables ask for something this runtime cannot export."""

    code = "invalid_configuration"


@dataclass
class _Tracing:
    provider: TracerProvider | None = None
    tracer: trace.Tracer | None = None


_state = _Tracing()


def tracing_enabled() -> bool:
    """True once this process has a tracing pipeline (the one check instrumented paths make)."""
    return _state.tracer is not None


def runtime_tracer() -> trace.Tracer:
    """The tracer of the runtime's spans; only call it when `tracing_enabled()`."""
    assert _state.tracer is not None, "tracing is not configured"
    return _state.tracer


def tracer_provider() -> TracerProvider | None:
    return _state.provider


def requested_exporters(env: Mapping[str, str] = os.environ) -> list[str]:
    """Exporter names the environment asks for; [] means tracing stays off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if names:
        return [] if names == ["none"] else names
    return ["otlp"] if any(env.get(name) for name in _ENDPOINT_VARIABLES) else []


def configure_tracing(service_name: str, env: Mapping[str, str] = os.environ) -> bool:
    """Build and install this process's pipeline when the environment asks for one and none is
    installed yet; True when this call installed it (the caller then shuts it down).

    `service_name` is the default `service.name` (OTEL_SERVICE_NAME overrides it).
    """
    if _state.provider is not None:
        return False
    exporters = [_exporter(name, env) for name in requested_exporters(env)]
    if not exporters:
        return False
    provider = TracerProvider(
        resource=Resource.create({"service.name": service_name}), id_generator=PinnableIdGenerator()
    )
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    install_tracer_provider(provider)
    log.info("tracing.configured", extra={"service_name": service_name, "exporters": len(exporters)})
    return True


def install_tracer_provider(provider: TracerProvider) -> None:
    """Use `provider` for the runtime's spans and, if none is set yet, as the global provider
    (the MCP SDK's own request spans use the global one)."""
    _state.provider = provider
    _state.tracer = provider.get_tracer(TRACER_NAME)
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(provider)


def shutdown_tracing() -> None:
    """Export what is buffered and stop the pipeline (the process is ending)."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.shutdown()


@contextmanager
def tracing_with(provider: TracerProvider) -> Iterator[TracerProvider]:
    """Run the runtime's spans through `provider` for a while (tests, embedding applications)."""
    previous = (_state.provider, _state.tracer)
    _state.provider, _state.tracer = provider, provider.get_tracer(TRACER_NAME)
    try:
        yield provider
    finally:
        _state.provider, _state.tracer = previous


def _exporter(name: str, env: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    if name != "otlp":
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER names '{name}', which this runtime does not ship.",
            hint="Use 'otlp' (OTLP over HTTP/protobuf), 'console' or 'none'.",
        )
    protocol = next((env[v] for v in _PROTOCOL_VARIABLES if env.get(v)), SUPPORTED_PROTOCOL)
    if protocol.strip().lower() != SUPPORTED_PROTOCOL:
        raise TracingConfigError(
            f"OTLP protocol '{protocol}' is not supported by this runtime.",
            hint=f"Set OTEL_EXPORTER_OTLP_PROTOCOL={SUPPORTED_PROTOCOL} and point "
            "OTEL_EXPORTER_OTLP_ENDPOINT at the collector's OTLP/HTTP port (usually 4318).",
        )
    # Imported only when exporting: the exporter pulls in requests and the OTLP protobufs.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()
