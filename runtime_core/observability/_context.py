"""Trace context that travels with a run, and W3C propagation through transport carriers.

Owns `RunTraceContext`: the `invoke_workflow` span of one shared run, allocated at submit as a
child of whatever span is current (the MCP `tools/call` span, which continues the client's
`traceparent` from `params._meta`), stored on the shared run record and handed to the
execution as the run attribute `trace.context`, so the pump, every dispatch, recovery and the
steps in any process parent their spans to it. Also owns injecting the current context into
outgoing HTTP headers / gRPC metadata and extracting it on the receiving side. Must not
create spans, and never fails a run: a malformed stored context reads as none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, MutableMapping

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime_core.observability._ids import new_span_id, new_trace_id
from runtime_core.observability._tracing import tracer_provider, tracing_enabled

log = logging.getLogger("runtime_core.observability")

# The run attribute (execution meta, dispatch request) and shared-run field holding the context.
TRACE_CONTEXT_KEY = "trace.context"

_HEX16 = r"^[0-9a-f]{16}$"
_HEX32 = r"^[0-9a-f]{32}$"


class RunTraceContext(BaseModel):
    """The run's span: its ids, its parent (None for a root), sampling, start and workflow name."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    trace_id: str = Field(pattern=_HEX32)
    span_id: str = Field(pattern=_HEX16)
    parent_span_id: str | None = Field(default=None, pattern=_HEX16)
    sampled: bool = True
    tracestate: str = ""
    started_ns: int = Field(default=0, ge=0)
    workflow: str = ""

    def span_context(self) -> SpanContext:
        """The run span as a remote parent."""
        return _remote(self.trace_id, self.span_id, self.sampled, self.tracestate)

    def as_parent(self) -> Context:
        """A context whose current span is the run span: spans started in it are its children."""
        return trace.set_span_in_context(NonRecordingSpan(self.span_context()))

    def parent_context(self) -> Context:
        """The context the run span itself starts in: its parent's, or empty for a root."""
        if self.parent_span_id is None:
            return Context()
        parent = _remote(self.trace_id, self.parent_span_id, self.sampled, self.tracestate)
        return trace.set_span_in_context(NonRecordingSpan(parent))

    @property
    def traceparent(self) -> str:
        """The W3C `traceparent` header naming the run span."""
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"

    def encode(self) -> str:
        return self.model_dump_json(exclude_defaults=True)

    @classmethod
    def decode(cls, raw: str | None) -> RunTraceContext | None:
        """The stored context, or None when absent or unreadable (a run never fails on it)."""
        if not raw:
            return None
        try:
            return cls.model_validate_json(raw)
        except ValidationError:
            log.warning("trace.context_unreadable", extra={"trace_context": raw[:200]})
            return None


def allocate_run_trace(workflow: str) -> RunTraceContext | None:
    """A new run span under the current span (or a new root while tracing is on), else None.

    With tracing off here but a valid incoming context (a client's `traceparent`), the run
    still gets an id so processes that do trace can parent their spans in the client's trace.
    """
    parent = trace.get_current_span().get_span_context()
    started_ns = time.time_ns()
    if parent.is_valid:
        return RunTraceContext(
            trace_id=format(parent.trace_id, "032x"),
            span_id=new_span_id(),
            parent_span_id=format(parent.span_id, "016x"),
            sampled=parent.trace_flags.sampled,
            tracestate=parent.trace_state.to_header(),
            started_ns=started_ns,
            workflow=workflow,
        )
    if not tracing_enabled():
        return None
    trace_id = new_trace_id()
    return RunTraceContext(
        trace_id=trace_id,
        span_id=new_span_id(),
        sampled=_root_sampled(trace_id, f"invoke_workflow {workflow}"),
        started_ns=started_ns,
        workflow=workflow,
    )


def inject_context(carrier: MutableMapping[str, str]) -> None:
    """Write the current span's `traceparent` (and `tracestate`) into outgoing headers / metadata."""
    if tracing_enabled():
        propagate.inject(carrier)


def extract_context(carrier: Mapping[str, str] | Iterable[tuple[str, str]]) -> Context:
    """The context a peer sent (empty when it sent none or garbage)."""
    pairs = carrier.items() if isinstance(carrier, Mapping) else carrier
    return propagate.extract({key.lower(): value for key, value in pairs if isinstance(value, str)})


def _remote(trace_id: str, span_id: str, sampled: bool, tracestate: str) -> SpanContext:
    return SpanContext(
        int(trace_id, 16),
        int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT),
        trace_state=TraceState.from_header([tracestate]) if tracestate else TraceState(),
    )


def _root_sampled(trace_id: str, name: str) -> bool:
    """What this process's sampler decides for a new root trace (the run span is that root)."""
    provider = tracer_provider()
    if provider is None:
        return False
    return provider.sampler.should_sample(None, int(trace_id, 16), name).decision.is_sampled()
