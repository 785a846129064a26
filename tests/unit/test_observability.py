"""Observability building blocks: tracing on/off from OTEL_* variables, the run trace context,
scrape-time gauges and their cache, capacity gauges, bounded MCP metric labels, step metrics."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from prometheus_client import CollectorRegistry, generate_latest

from mcp_runtime.observability import OTHER, McpOperationMetrics
from runtime_core.audit import MetricsObserver, RuntimeMetrics
from runtime_core.dag import EngineEvent
from runtime_core.instances import CapacityDescriptor
from runtime_core.observability import (
    CachedGauges,
    GaugeFamily,
    GaugeValues,
    MetricsExposition,
    ObservabilitySettings,
    RunTraceContext,
    TracingConfigError,
    allocate_run_trace,
    capacity_gauges,
    configure_tracing,
    requested_exporters,
    tracing_enabled,
    tracing_with,
)
from tests.e2e.mcp_support import clean_environment


@pytest.mark.parametrize(
    ("env", "exporters"),
    [
        ({}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, []),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ["otlp", "console"]),
    ],
)
def test_tracing_is_on_only_when_the_otel_variables_ask_for_an_exporter(
    env: dict[str, str], exporters: list[str]
) -> None:
    assert requested_exporters(env) == exporters


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "does not ship"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "not supported",
        ),
    ],
)
def test_an_exporter_this_runtime_cannot_run_is_a_typed_configuration_error(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(TracingConfigError, match=message) as refused:
        configure_tracing("test", env)
    assert refused.value.code == "invalid_configuration" and refused.value.hint
    assert not tracing_enabled()


def test_without_otel_variables_a_process_builds_no_pipeline_and_loads_no_exporter() -> None:
    env = {k: v for k, v in clean_environment().items() if not k.startswith("OTEL_")}
    program = (
        "import sys\n"
        "from runtime_core.observability import configure_tracing, tracing_enabled\n"
        "from opentelemetry import trace\n"
        "assert configure_tracing('x') is False and not tracing_enabled()\n"
        "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'\n"
        "assert 'opentelemetry.exporter.otlp.proto.http.trace_exporter' not in sys.modules\n"
        "print('off')\n"
    )
    checked = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert checked.returncode == 0 and checked.stdout.strip() == "off", checked.stderr


def test_a_run_under_a_clients_span_continues_its_trace_with_a_new_span_id() -> None:
    client = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(client)))
    try:
        run = allocate_run_trace("rag")
    finally:
        context.detach(token)
    assert run is not None
    assert (run.trace_id, run.parent_span_id) == (format(0x1234, "032x"), format(0x5678, "016x"))
    assert run.span_id != run.parent_span_id and run.sampled and run.workflow == "rag"
    assert run.traceparent == f"00-{run.trace_id}-{run.span_id}-01"
    assert RunTraceContext.decode(run.encode()) == run


def test_a_run_without_any_trace_gets_no_context_while_tracing_is_off() -> None:
    assert not tracing_enabled()
    assert allocate_run_trace("rag") is None


def test_a_run_without_a_parent_is_a_new_root_sampled_by_this_process() -> None:
    with tracing_with(TracerProvider()):
        sampled = allocate_run_trace("rag")
    with tracing_with(TracerProvider(sampler=ALWAYS_OFF)):
        dropped = allocate_run_trace("rag")
    assert sampled is not None and sampled.parent_span_id is None and sampled.sampled
    assert dropped is not None and not dropped.sampled


@pytest.mark.parametrize("raw", [None, "", "not json", '{"trace_id": "xyz", "span_id": "1"}', "[]"])
def test_an_unreadable_stored_trace_context_reads_as_none(raw: str | None) -> None:
    assert RunTraceContext.decode(raw) is None


async def test_scrape_time_gauges_are_read_once_per_ttl_and_a_failing_reader_is_left_out() -> None:
    reads = {"ok": 0, "broken": 0}

    async def ok() -> GaugeValues:
        reads["ok"] += 1
        return {("a",): 1.0, ("b",): 2.0}

    async def broken() -> GaugeValues:
        reads["broken"] += 1
        raise ConnectionError("redis down")

    gauges = CachedGauges(
        [GaugeFamily("t_ok", "ok", ("k",), ok), GaugeFamily("t_broken", "broken", (), broken)], ttl_s=60
    )
    exposition = MetricsExposition(CollectorRegistry())
    exposition.add_gauges(gauges)
    first, content_type = await exposition.render()
    second, _ = await exposition.render()
    assert reads == {"ok": 1, "broken": 1} and first == second
    assert content_type.startswith("text/plain; version=0.0.4")
    assert b't_ok{k="a"} 1.0' in first and b't_ok{k="b"} 2.0' in first and b"t_broken" not in first


async def test_openmetrics_is_served_when_the_scraper_asks_for_it() -> None:
    exposition = MetricsExposition(RuntimeMetrics().registry)
    body, content_type = await exposition.render("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")


def _capacity(instance: str, tenant: str | None, running: int) -> CapacityDescriptor:
    return CapacityDescriptor(
        runtime_instance_id=instance,
        worker_count=4,
        active_workers=running,
        available_workers=4 - running,
        max_local_workers_per_execution=4,
        queued=1,
        running=running,
        active_runs=running + 1,
        queue_capacity=10,
        max_concurrent_runs=3,
        available_run_slots=3 - running - 1,
        queue_paused=False,
        can_accept_run=True,
        tenant_id=tenant,
    )


@pytest.mark.parametrize("tenant_labels", [False, True])
async def test_capacity_gauges_show_each_hosted_instance_and_tenants_only_when_enabled(
    tenant_labels: bool,
) -> None:
    hosted = [_capacity("rt_a", "acme", 1), _capacity("rt_b", None, 2)]
    registry = CollectorRegistry()
    settings = ObservabilitySettings(metrics_tenant_labels=tenant_labels, metrics_cache_s=0)
    exposition = MetricsExposition(registry)
    exposition.add_gauges(capacity_gauges(lambda: hosted, settings))
    await exposition.render()

    owner = {"tenant": "acme"} if tenant_labels else {}
    labels = {"runtime_instance_id": "rt_a", **owner, "state": "available"}
    assert registry.get_sample_value("mcprt_instance_workers", labels) == 3
    assert registry.get_sample_value("mcprt_instance_runs", {**labels, "state": "queued"}) == 1
    assert registry.get_sample_value("mcprt_instance_run_slots", {**labels, "state": "used"}) == 2
    assert registry.get_sample_value("mcprt_executions_running", {}) == 3
    assert (b'tenant="' in generate_latest(registry)) is tenant_labels


def test_tenant_labels_and_cache_come_from_the_environment() -> None:
    assert ObservabilitySettings.from_env({}) == ObservabilitySettings()
    chosen = ObservabilitySettings.from_env(
        {"MCP_RUNTIME_METRICS_TENANT_LABELS": "true", "MCP_RUNTIME_METRICS_CACHE_SECONDS": "0.5"}
    )
    assert chosen.metrics_tenant_labels and chosen.metrics_cache_s == 0.5


def test_mcp_operation_labels_stay_bounded_whatever_a_client_sends() -> None:
    registry = CollectorRegistry()
    metrics = McpOperationMetrics.of(registry)
    assert McpOperationMetrics.of(registry) is metrics  # one histogram per registry
    tools = frozenset({"submit"})
    metrics.observe("tools/call", "submit", "", 0.01, tools=tools)
    metrics.observe("tools/call", "drop table runs", "tool_error", 0.01, tools=tools)
    metrics.observe("x/" + "y" * 500, None, "-32601", 0.01, tools=tools)

    def count(method: str, tool: str, error: str) -> float | None:
        labels = {"mcp_method_name": method, "gen_ai_tool_name": tool, "error_type": error}
        return registry.get_sample_value("mcp_server_operation_duration_seconds_count", labels)

    assert count("tools/call", "submit", "") == 1
    assert count("tools/call", OTHER, "tool_error") == 1
    assert count(OTHER, "", "-32601") == 1


async def test_retry_exhaustion_is_counted_by_step_key_apart_from_scheduled_retries() -> None:
    metrics = RuntimeMetrics()
    observer = MetricsObserver(metrics)
    for attempt, outcome in enumerate(["step.retry_scheduled", "step.failed"]):
        worker = f"w{attempt}"
        await observer.on_event(
            EngineEvent("step.claimed", "exec_x", None, "call", worker, attributes={"step_key": "llm.prompt"})
        )
        exhausted = {"retries_exhausted": True} if outcome == "step.failed" else {}
        await observer.on_event(EngineEvent(outcome, "exec_x", None, "call", worker, attributes=exhausted))

    key = {"step_key": "llm.prompt"}
    assert metrics.value("mcprt_step_retries_total", key) == 1
    assert metrics.value("mcprt_step_retries_exhausted_total", key) == 1
    assert metrics.value("mcprt_step_duration_seconds_count", {**key, "outcome": "failed"}) == 1


async def test_execution_durations_are_bucketed_up_to_a_day_by_final_status() -> None:
    metrics = RuntimeMetrics()
    observer = MetricsObserver(metrics)
    for execution_id, status in (("exec_ok", "Completed"), ("exec_bad", "Failed")):
        await observer.on_event(EngineEvent("execution.created", execution_id, None))
        await observer.on_event(
            EngineEvent("execution.finalized", execution_id, None, attributes={"status": status})
        )

    for status in ("Completed", "Failed"):
        assert metrics.value("mcprt_execution_duration_seconds_count", {"status": status}) == 1
        for hours in (1, 4, 8, 24):
            bucket = {"status": status, "le": f"{hours * 3600:.1f}"}
            assert metrics.value("mcprt_execution_duration_seconds_bucket", bucket) == 1


async def test_the_exposition_has_no_created_series() -> None:
    metrics = RuntimeMetrics()
    metrics.executions_started.inc()
    metrics.step_seconds.labels(step_key="test.noop", outcome="completed").observe(0.01)
    metrics.webhook_settled("dead_lettered")
    body, _ = await MetricsExposition(metrics.registry).render()
    assert b"mcprt_executions_started_total 1.0" in body
    assert b'mcprt_webhook_deliveries_total{outcome="dead_lettered"} 1.0' in body
    assert b"_created" not in body
