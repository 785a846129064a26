"""The span of each step attempt, made without the SDK's live-span machinery.

Owns `OtelStepTracing`, the engine's `StepTracing` while tracing is on: one INTERNAL span per
step attempt, child of the run span, current while the executor runs (what it does nests
under it). A step span needs none of what a live SDK span pays for (a lock, attribute
validation, the sampler per span, events, on_start hooks): while the step runs only its
context is current (a `NonRecordingSpan`: the ids children inherit), and when it ends one
finished `ReadableSpan` goes to the tracer's span processor (the batch processor exports it
with the others). The sampling decision is made once per run with the tracer's sampler; a
run it drops costs nothing at all (no span, no context). Must not change what it observes.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache
from typing import Any

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Tracer
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runtime_core.dag import ExecutionMeta
from runtime_core.observability._context import RunTraceContext
from runtime_core.observability._spans import run_trace_of
from runtime_core.observability._tracing import TRACER_NAME, runtime_tracer, tracing_enabled
from runtime_core.pipeline import StepDefinition
from runtime_core.steps import StepFailure, StepParked

_SCOPE = InstrumentationScope(TRACER_NAME)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSET, _ERROR = Status(StatusCode.UNSET), StatusCode.ERROR


class OtelStepTracing:
    """`runtime_core.dag.StepTracing` with one span per step attempt (name, key, attempt and
    the worker id `<runtime instance id>/w<n>` that names the instance that ran it; the run
    span carries the execution and workflow)."""

    def __init__(self) -> None:
        # The parent of the last step span asked for: the steps of one run come one after
        # another, and hashing the run's trace context per step costs a span's worth.
        self._last: tuple[ExecutionMeta, object, SpanContext | None] | None = None

    def step_span(
        self, meta: ExecutionMeta, step: StepDefinition, attempt: int, worker_id: str
    ) -> AbstractContextManager[object]:
        if not tracing_enabled():
            return nullcontext()
        tracer = runtime_tracer()
        last = self._last
        if last is not None and last[0] is meta and last[1] is tracer:
            parent = last[2]
        else:
            parent = _sampled_parent(tracer, run_trace_of(meta)) if isinstance(tracer, Tracer) else None
            self._last = (meta, tracer, parent)
        if parent is None:
            return nullcontext()
        return _StepSpan(tracer, parent, step, attempt, worker_id)


@lru_cache(maxsize=4096)
def _sampled_parent(tracer: Tracer, run: RunTraceContext) -> SpanContext | None:
    """The run span as its steps' parent, or None when the tracer's sampler drops the run's
    steps (decided once per run and tracer)."""
    parent = run.span_context()
    result = tracer.sampler.should_sample(
        trace.set_span_in_context(NonRecordingSpan(parent)), parent.trace_id, "step", SpanKind.INTERNAL
    )
    return parent if result.decision.is_sampled() else None


class _StepSpan:
    """Entered around the executor call: the step's span context is current inside; at the end
    the finished span goes to the span processor."""

    __slots__ = ("_attributes", "_context", "_name", "_parent", "_start_ns", "_token", "_tracer")

    def __init__(
        self, tracer: Tracer, parent: SpanContext, step: StepDefinition, attempt: int, worker_id: str
    ) -> None:
        self._tracer = tracer
        self._parent = parent
        self._name = f"step {step.name}"
        self._attributes: dict[str, Any] = {
            "mcprt.step.name": step.name,
            "mcprt.step.key": step.step_key,
            "mcprt.step.attempt": attempt,
            "mcprt.worker.id": worker_id,
        }

    def __enter__(self) -> SpanContext:
        parent = self._parent
        span_id = self._tracer.id_generator.generate_span_id()
        self._context = SpanContext(parent.trace_id, span_id, False, _SAMPLED, parent.trace_state)
        self._token = context_api.attach(trace.set_span_in_context(NonRecordingSpan(self._context)))
        self._start_ns = time.time_ns()
        return self._context

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        end_ns = time.time_ns()
        context_api.detach(self._token)
        attributes, status = self._attributes, _UNSET
        if exc is None:
            attributes["mcprt.step.outcome"] = "completed"
        elif isinstance(exc, StepParked):
            attributes["mcprt.step.outcome"] = "parked"
        elif isinstance(exc, StepFailure):
            attributes["mcprt.step.outcome"], attributes["error.type"] = "failed", exc.code
            status = Status(_ERROR, exc.message)
        else:
            attributes["error.type"] = type(exc).__qualname__
            status = Status(_ERROR)
        self._tracer.span_processor.on_end(
            ReadableSpan(
                name=self._name,
                context=self._context,
                parent=self._parent,
                resource=self._tracer.resource,
                attributes=attributes,
                kind=SpanKind.INTERNAL,
                status=status,
                start_time=self._start_ns,
                end_time=end_ns,
                instrumentation_scope=_SCOPE,
            )
        )
