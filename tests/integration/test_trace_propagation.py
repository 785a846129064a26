"""Trace context from submit to the steps, on a real redis-server and a real HTTP command endpoint.

The control plane, the HTTP runtime-instance endpoint (uvicorn on a loopback port, reached by
the real `HttpRuntimeProvider` over httpx) and the engine run in this process with one
in-memory span exporter, so every span of the chain can be checked: the run's
`invoke_workflow` span under the submitting span, the dispatch under the run, the endpoint's
SERVER span continued from the `traceparent` header, and every step under the run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, StatusCode, TraceFlags

from runtime_core.audit import execution_span_id, trace_id_for
from runtime_core.control_plane import ControlPlane
from runtime_core.dag import CompositeObserver, DagEngine
from runtime_core.hosting import HttpCommandEndpoint, RuntimeCommands, build_http_app
from runtime_core.hot_state import HotState, find_free_port
from runtime_core.observability import (
    TRACE_CONTEXT_KEY,
    OtelStepTracing,
    PinnableIdGenerator,
    RunTraceContext,
    WorkflowSpanObserver,
    runtime_tracer,
    tracing_with,
)
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SharedRunStatus, SubmitMode
from runtime_core.storage import SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, TENANT_A, control_plane, start_instance
from tests.integration.recovery_support import (
    crash,
    mark_unsafe,
    queue_locally,
    recovery_rig,
    start_in_flight,
    tenant_instance,
    wait_completed,
)

CHAIN = parse_pipeline(
    {
        "name": "traced",
        "steps": [
            {"name": "first", "stepKey": "test.noop"},
            {"name": "second", "stepKey": "test.noop", "dependsOn": ["first"]},
        ],
    }
)
FLAKY = parse_pipeline(
    {
        "name": "flaky",
        "steps": [
            {
                "name": "wobbly",
                "stepKey": "test.flaky",
                "config": {"failTimes": 1, "retry": {"maxRetries": 1, "baseDelayMs": 1}},
            }
        ],
    }
)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=PinnableIdGenerator())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing_with(provider):
        yield exporter


def _traced(engine: DagEngine) -> None:
    """What `runtime_core.bootstrap` attaches when tracing is on."""
    engine.step_tracing = OtelStepTracing()
    engine.observer = CompositeObserver(WorkflowSpanObserver(engine.store), engine.observer)


@pytest.fixture
async def http_plane(hot_state: HotState) -> AsyncIterator[ControlPlane]:
    """A control plane whose only instance is reached through the HTTP provider and endpoint."""
    plane = control_plane(hot_state)
    _traced(plane.parts.engine)
    port = find_free_port()
    endpoint = HttpCommandEndpoint(
        build_http_app(RuntimeCommands(plane.parts.pool), lambda: {}), "127.0.0.1", port
    )
    await endpoint.start()
    http = {
        "provider_name": "http",
        "transport_name": "http",
        "transport_endpoint": f"http://127.0.0.1:{port}",
    }
    await start_instance(plane, "http-runtime", **http)
    try:
        yield plane
    finally:
        await plane.stop()
        await endpoint.stop()


def _by_name(exported: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [span for span in exported if span.name.startswith(prefix)]


def _parent(span: ReadableSpan) -> str | None:
    return format(span.parent.span_id, "016x") if span.parent is not None else None


def _span_id(span: ReadableSpan) -> str:
    return format(span.get_span_context().span_id, "016x")


async def _completed(plane: ControlPlane, run_id: str) -> dict[str, Any]:
    async def done() -> bool:
        await plane.drain(10, DEFAULT_TENANT)
        return (await plane.run_status(run_id, DEFAULT_TENANT)).local_status == "Completed"

    await wait_until(done, timeout=20, interval=0.05)
    return (await plane.run_status(run_id, DEFAULT_TENANT)).model_dump()


async def test_one_trace_runs_from_the_submitting_span_through_the_http_provider_to_every_step(
    http_plane: ControlPlane, spans: InMemorySpanExporter
) -> None:
    with runtime_tracer().start_as_current_span("tools/call submit", kind=SpanKind.SERVER) as request:
        submitted = await http_plane.submit(CHAIN, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    status = await _completed(http_plane, submitted.shared_run_id)
    assert status["execution_status"] == "Completed"

    trace_id = request.get_span_context().trace_id
    everything = spans.get_finished_spans()
    exported = tuple(span for span in everything if span.get_span_context().trace_id == trace_id)
    # Outside the run's trace: only the status polls, each its own trace.
    assert {s.name for s in everything if s not in exported} <= {
        "GET /runtime/{runtime_instance_id}/runs/{local_run_id}"
    }

    [run] = _by_name(exported, "invoke_workflow")
    assert run.name == "invoke_workflow traced" and _parent(run) == _span_id(request)
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["mcprt.shared_run.id"] == submitted.shared_run_id
    assert run.status.status_code is StatusCode.OK

    [dispatch] = _by_name(exported, "dispatch traced")
    assert dispatch.kind is SpanKind.CLIENT and _parent(dispatch) == _span_id(run)
    assert dispatch.attributes["mcprt.provider.name"] == "http"

    [received] = _by_name(exported, "POST /runtime/{runtime_instance_id}/dispatch")
    assert received.kind is SpanKind.SERVER and _parent(received) == _span_id(dispatch)
    assert received.attributes["http.route"] == "/runtime/{runtime_instance_id}/dispatch"

    steps = _by_name(exported, "step ")
    assert sorted(s.attributes["mcprt.step.name"] for s in steps) == ["first", "second"]
    assert {_parent(s) for s in steps} == {_span_id(run)}
    assert all(s.attributes["mcprt.step.outcome"] == "completed" for s in steps)
    assert all(run.start_time <= s.start_time and s.end_time <= run.end_time for s in steps)


async def test_the_shared_run_keeps_the_clients_context_even_where_tracing_is_off(
    http_plane: ControlPlane,
) -> None:
    client = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(client)))
    try:
        submitted = await http_plane.submit(CHAIN, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    finally:
        context.detach(token)
    status = await _completed(http_plane, submitted.shared_run_id)

    record = await http_plane.parts.runs.get(submitted.shared_run_id)
    assert record is not None
    run = RunTraceContext.decode(record.trace_context)
    assert run is not None and run.trace_id == format(0xABC, "032x")
    assert run.parent_span_id == format(0xDEF, "016x") and run.workflow == "traced"
    meta = await http_plane.parts.dag_store.load_meta(status["execution_id"])
    assert meta is not None and RunTraceContext.decode(meta.attributes[TRACE_CONTEXT_KEY]) == run


async def test_without_any_trace_the_shared_run_stores_no_context(http_plane: ControlPlane) -> None:
    submitted = await http_plane.submit(CHAIN, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    record = await http_plane.parts.runs.get(submitted.shared_run_id)
    assert record is not None and record.trace_context is None


async def test_an_execution_without_run_context_uses_the_stored_trace_ids_and_marks_failed_attempts(
    hot_state: HotState, spans: InMemorySpanExporter
) -> None:
    plane = control_plane(hot_state)
    engine = plane.parts.engine
    _traced(engine)
    execution_id = await engine.create_execution(FLAKY, {}, DEFAULT_TENANT)
    assert await engine.run(execution_id, workers=1) == "Completed"

    exported = spans.get_finished_spans()
    assert {format(s.get_span_context().trace_id, "032x") for s in exported} == {trace_id_for(execution_id)}
    [run] = _by_name(exported, "invoke_workflow")
    assert _span_id(run) == execution_span_id(execution_id) and run.parent is None
    failed, succeeded = sorted(_by_name(exported, "step wobbly"), key=lambda s: s.start_time)
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["error.type"] == "transient"
    assert failed.attributes["mcprt.step.attempt"] == 0 and succeeded.attributes["mcprt.step.attempt"] == 1
    assert succeeded.status.status_code is StatusCode.UNSET
    assert {_parent(failed), _parent(succeeded)} == {execution_span_id(execution_id)}


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[SqliteDurableStore]:
    store = await SqliteDurableStore.open(tmp_path / "runtime.db")
    yield store
    await store.close()


async def test_recovery_continues_the_runs_trace_on_the_replacement_instance(
    hot_state: HotState, durable: SqliteDurableStore, spans: InMemorySpanExporter
) -> None:
    rig = recovery_rig(hot_state, durable)
    _traced(rig.plane.parts.engine)
    try:
        dead = await tenant_instance(rig, TENANT_A, n=1)
        with runtime_tracer().start_as_current_span("tools/call submit", kind=SpanKind.SERVER) as request:
            in_flight = await start_in_flight(rig, TENANT_A)
        await crash(dead)
        await mark_unsafe(rig, dead)
        await tenant_instance(rig, TENANT_A, n=2)
        await rig.plane.parts.recovery.reconcile_once()
        rig.gate.release()
        await wait_completed(rig, [in_flight.shared_run_id])
    finally:
        await rig.plane.stop()

    trace_id = request.get_span_context().trace_id
    exported = tuple(s for s in spans.get_finished_spans() if s.get_span_context().trace_id == trace_id)
    [run] = _by_name(exported, "invoke_workflow")
    assert (
        _parent(run) == _span_id(request) and run.attributes["mcprt.execution.id"] == in_flight.execution_id
    )
    dispatches = _by_name(exported, "dispatch resumable")
    assert len(dispatches) == 2 and {_parent(d) for d in dispatches} == {_span_id(run)}
    assert [d.attributes["mcprt.runtime_instance.id"].rsplit("-", 1)[1] for d in dispatches] == ["1", "2"]
    after_resume = [
        s for s in _by_name(exported, "step ") if s.attributes["mcprt.step.name"] in {"b1", "b2", "z"}
    ]
    assert len(after_resume) == 3 and {_parent(s) for s in after_resume} == {_span_id(run)}
    assert all(":tenant-a-runtime-2/" in s.attributes["mcprt.worker.id"] for s in after_resume)


def _run_span_of(spans: InMemorySpanExporter, request: Span) -> ReadableSpan:
    """The one `invoke_workflow` span in the submitting span's trace."""
    trace_id = request.get_span_context().trace_id
    exported = tuple(s for s in spans.get_finished_spans() if s.get_span_context().trace_id == trace_id)
    [run] = _by_name(exported, "invoke_workflow")
    assert _parent(run) == _span_id(request)
    return run


async def _allocated_span_id(plane: ControlPlane, shared_run_id: str) -> str:
    record = await plane.parts.runs.get(shared_run_id)
    assert record is not None
    allocated = RunTraceContext.decode(record.trace_context)
    assert allocated is not None
    return allocated.span_id


async def test_a_run_rejected_at_submit_ends_its_run_span(
    hot_state: HotState, spans: InMemorySpanExporter
) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    try:
        with runtime_tracer().start_as_current_span("tools/call submit", kind=SpanKind.SERVER) as request:
            result = await plane.submit(CHAIN, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        assert result.status is SharedRunStatus.REJECTED

        run = _run_span_of(spans, request)
        assert _span_id(run) == await _allocated_span_id(plane, result.shared_run_id)
    finally:
        await plane.stop()
    assert run.name == "invoke_workflow traced"
    assert run.attributes["mcprt.shared_run.id"] == result.shared_run_id
    assert run.attributes["mcprt.shared_run.status"] == "Rejected"
    assert run.status.status_code is StatusCode.ERROR and run.attributes["error.type"] == "workflow_rejected"


async def test_a_run_cancelled_in_the_shared_queue_ends_its_run_span(
    hot_state: HotState, spans: InMemorySpanExporter
) -> None:
    plane = control_plane(hot_state)
    try:
        with runtime_tracer().start_as_current_span("tools/call submit", kind=SpanKind.SERVER) as request:
            submitted = await plane.submit(CHAIN, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        cancelled = await plane.cancel(submitted.shared_run_id, DEFAULT_TENANT)
        assert cancelled.shared_status == "Cancelled" and cancelled.execution_id is None

        run = _run_span_of(spans, request)
        assert _span_id(run) == await _allocated_span_id(plane, submitted.shared_run_id)
    finally:
        await plane.stop()
    assert run.attributes["mcprt.shared_run.status"] == "Cancelled"
    assert run.status.status_code is StatusCode.UNSET and run.start_time <= run.end_time


async def test_a_run_cancelled_in_its_instances_queue_ends_its_run_span(
    hot_state: HotState, durable: SqliteDurableStore, spans: InMemorySpanExporter
) -> None:
    rig = recovery_rig(hot_state, durable)
    try:
        instance = await tenant_instance(rig, TENANT_A)
        await instance.pause_queue()
        with runtime_tracer().start_as_current_span("tools/call submit", kind=SpanKind.SERVER) as request:
            shared_run_id = await queue_locally(rig, instance, TENANT_A)
        cancelled = await rig.plane.cancel(shared_run_id, TENANT_A)
        assert cancelled.local_status == "Cancelled" and cancelled.execution_id is None

        run = _run_span_of(spans, request)
        assert _span_id(run) == await _allocated_span_id(rig.plane, shared_run_id)
    finally:
        await rig.plane.stop()
    assert run.attributes["mcprt.shared_run.id"] == shared_run_id
    assert run.attributes["mcprt.shared_run.status"] == "Cancelled"
