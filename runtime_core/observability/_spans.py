"""The runtime's OpenTelemetry spans: dispatch, command receipt, step, and the run (`invoke_workflow`).

Owns span names, kinds and attributes (`mcprt.*` plus the GenAI `gen_ai.operation.name` /
`gen_ai.workflow.name` of the run span) and their parents: a dispatch and every step are
children of the run span (`RunTraceContext`); a runtime-instance process's command span
continues the dispatch span from the HTTP headers / gRPC metadata; the run span itself is
recorded once, by the process whose worker finalizes the execution, with the id allocated at
submit and the run's real start and end (or, for a run that never executed, by the process
that rejected or cancelled it). Executions without a run context (the `run` CLI,
direct engine use) use the ids of the stored trace (`trace_id_for`, `execution_span_id`).
Every helper is a no-op while tracing is off. Must not change what it observes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode

from runtime_core.audit import execution_span_id, trace_id_for
from runtime_core.dag import DagStore, EngineEvent, ExecutionMeta
from runtime_core.observability._context import TRACE_CONTEXT_KEY, RunTraceContext, extract_context
from runtime_core.observability._ids import pinned_ids
from runtime_core.observability._tracing import runtime_tracer, tracing_enabled

log = logging.getLogger("runtime_core.observability")

_RUN_STATUS = {"Completed": StatusCode.OK, "Failed": StatusCode.ERROR, "Rejected": StatusCode.ERROR}
_RUN_ERROR_TYPES = {"Failed": "workflow_failed", "Rejected": "workflow_rejected"}


@contextmanager
def dispatch_span(
    run_trace: RunTraceContext | None, name: str, attributes: Mapping[str, Any]
) -> Iterator[Span | None]:
    """A CLIENT span around one provider dispatch, child of the run span; current while inside,
    so the HTTP / gRPC provider propagates it to the runtime-instance process."""
    if not tracing_enabled():
        yield None
        return
    parent = run_trace.as_parent() if run_trace is not None else None
    with runtime_tracer().start_as_current_span(
        name, context=parent, kind=SpanKind.CLIENT, attributes=dict(attributes)
    ) as span:
        yield span


@contextmanager
def command_span(
    name: str, carrier: Mapping[str, str] | Iterable[tuple[str, str]], attributes: Mapping[str, Any]
) -> Iterator[Span | None]:
    """A SERVER span for one command a runtime-instance process received, continuing the
    sender's context from the transport's headers / metadata."""
    if not tracing_enabled():
        yield None
        return
    with runtime_tracer().start_as_current_span(
        name, context=extract_context(carrier), kind=SpanKind.SERVER, attributes=dict(attributes)
    ) as span:
        yield span


def run_trace_of(meta: ExecutionMeta) -> RunTraceContext:
    """The execution's run context, or the stored trace's ids when it was started without one."""
    return _run_trace(
        meta.execution_id, meta.attributes.get(TRACE_CONTEXT_KEY), meta.created_at_ms, meta.pipeline.name
    )


@lru_cache(maxsize=4096)
def _run_trace(execution_id: str, stored: str | None, created_ms: int, workflow: str) -> RunTraceContext:
    # Cached: every step of an execution asks again (decoding and hashing cost a span's worth).
    return RunTraceContext.decode(stored) or _derived_run_trace(execution_id, created_ms, workflow)


def _derived_run_trace(execution_id: str, created_ms: int, workflow: str) -> RunTraceContext:
    """A root run span with the stored trace's ids (same in every process, like that trace)."""
    return RunTraceContext(
        trace_id=trace_id_for(execution_id),
        span_id=execution_span_id(execution_id),
        started_ns=created_ms * 1_000_000,
        workflow=workflow,
    )


def _parent_of(meta: ExecutionMeta) -> Context:
    return _as_parent(run_trace_of(meta))


@lru_cache(maxsize=4096)
def _as_parent(run: RunTraceContext) -> Context:
    return run.as_parent()


class WorkflowSpanObserver:
    """Engine observer that records the run's `invoke_workflow` span when its execution finalizes."""

    event_names = frozenset({"execution.finalized"})  # a CompositeObserver hands it no other

    def __init__(self, dag_store: DagStore) -> None:
        self.dag_store = dag_store

    async def on_event(self, event: EngineEvent) -> None:
        if event.name != "execution.finalized" or not tracing_enabled():
            return
        try:
            await self._record(event)
        except Exception:  # an observer must never crash the engine's worker
            log.exception("trace.run_span_failed", extra={"execution_id": event.execution_id})

    async def _record(self, event: EngineEvent) -> None:
        end_ns = time.time_ns()  # the finalization is being observed now, in this process
        fields = (TRACE_CONTEXT_KEY, "created_at_ms", "shared_run_id", "pipeline")
        if event.meta is not None:  # the engine's event carries the execution's metadata
            raw = {field: event.meta.attributes.get(field) for field in fields[:3]}
            workflow = event.meta.pipeline.name  # parsed already: no decoding of its document
        else:
            meta_key = self.dag_store.keys(event.execution_id).meta
            values = await self.dag_store.hot_state.redis.hmget(meta_key, fields)
            raw = dict(zip(fields, values, strict=True))
            workflow = None
        created_ms = int(raw["created_at_ms"] or 0)
        run = RunTraceContext.decode(raw[TRACE_CONTEXT_KEY]) or _derived_run_trace(
            event.execution_id,
            created_ms,
            workflow if workflow is not None else _pipeline_name(raw["pipeline"]),
        )
        status = str(event.attributes.get("status"))
        attributes: dict[str, Any] = {
            "mcprt.execution.id": event.execution_id,
            "mcprt.execution.status": status,
        }
        if raw["shared_run_id"]:
            attributes["mcprt.shared_run.id"] = raw["shared_run_id"]
        _record_run_span(run, status, attributes, created_ms * 1_000_000, end_ns)


def end_unexecuted_run_span(trace_context: str | None, *, shared_run_id: str, status: str) -> None:
    """Record the `invoke_workflow` span of a run that ended without ever executing (rejected,
    or cancelled while queued): no execution will finalize it. A no-op without a stored
    context or while tracing is off; never raises."""
    run = RunTraceContext.decode(trace_context)
    if run is None or not tracing_enabled():
        return
    attributes = {"mcprt.shared_run.id": shared_run_id, "mcprt.shared_run.status": status}
    try:
        _record_run_span(run, status, attributes, 0, time.time_ns())
    except Exception:  # evidence must never fail the transition it describes
        log.exception("trace.run_span_failed", extra={"shared_run_id": shared_run_id})


def _record_run_span(
    run: RunTraceContext, status: str, attributes: dict[str, Any], created_ns: int, end_ns: int
) -> None:
    """The run span with its allocated ids, from the run's start (or `created_ns`) to `end_ns`."""
    start_ns = run.started_ns or created_ns
    with pinned_ids(run.trace_id, run.span_id):
        span = runtime_tracer().start_span(
            f"invoke_workflow {run.workflow}".rstrip(),
            context=run.parent_context(),
            attributes={
                "gen_ai.operation.name": "invoke_workflow",
                "gen_ai.workflow.name": run.workflow,
                **attributes,
            },
            start_time=start_ns,
        )
    if status in _RUN_STATUS:
        span.set_status(_RUN_STATUS[status])
    if status in _RUN_ERROR_TYPES:
        span.set_attribute("error.type", _RUN_ERROR_TYPES[status])
    span.end(end_time=max(start_ns, end_ns))


def _pipeline_name(raw: str | None) -> str:
    try:
        document = json.loads(raw or "{}")
    except ValueError:
        return ""
    return str(document.get("name", "")) if isinstance(document, dict) else ""
