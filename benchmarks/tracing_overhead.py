"""Tracing overhead: the engine with tracing off (as shipped without OTEL_* variables) against
the same engine with step and run spans on, in the same run on the same redis-server.

Tracing on uses the real SDK pipeline (TracerProvider, BatchSpanProcessor) with an exporter
that drops the batches, so the figure is the runtime's own span cost, not a collector's.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from benchmarks._harness import Row
from benchmarks.engine_throughput import engine_run, fan_out
from runtime_core.dag import CompositeObserver, DagEngine
from runtime_core.observability import (
    OtelStepTracing,
    PinnableIdGenerator,
    WorkflowSpanObserver,
    tracing_with,
)
from runtime_core.pipeline import PipelineDefinition


class _DroppingExporter(SpanExporter):
    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def _traced(engine: DagEngine) -> None:
    """What `runtime_core.bootstrap` attaches when tracing is on."""
    engine.step_tracing = OtelStepTracing()
    engine.observer = CompositeObserver(WorkflowSpanObserver(engine.store), engine.observer)


async def _traced_run(redis_url: str, pipeline: PipelineDefinition, workers: int) -> Row:
    exporter = _DroppingExporter()
    provider = TracerProvider(id_generator=PinnableIdGenerator())
    provider.add_span_processor(BatchSpanProcessor(exporter))
    with tracing_with(provider):
        row = await engine_run(redis_url, pipeline, workers, name="tracing on", prepare=_traced)
    provider.shutdown()
    row.extra = {"spans_exported": exporter.spans}
    return row


async def run(redis_url: str, *, width: int, worker_counts: list[int]) -> list[Row]:
    """Per worker count: off, on, on, off; each variant keeps its faster run (less drift bias)."""
    rows: list[Row] = []
    pipeline = fan_out(width)
    for workers in worker_counts:
        first_off = await engine_run(redis_url, pipeline, workers, name="tracing off")
        on = max([await _traced_run(redis_url, pipeline, workers) for _ in range(2)], key=_speed)
        off = max([first_off, await engine_run(redis_url, pipeline, workers, name="tracing off")], key=_speed)
        on.ratio, on.baseline = on.steps_per_s / off.steps_per_s, "tracing off"
        rows += [off, on]
    return rows


def _speed(row: Row) -> float:
    return row.steps_per_s
