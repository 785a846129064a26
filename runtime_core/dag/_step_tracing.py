"""The seam through which a tracer wraps each step invocation (the engine knows no tracing library).

Owns the `StepTracing` protocol the engine calls around one executor invocation, and the
default that does nothing. `runtime_core.observability` implements it with OpenTelemetry spans
so that what an executor does (HTTP calls, LLM requests) nests under the step's span. Must not
decide anything about the step.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

from runtime_core.dag._records import ExecutionMeta
from runtime_core.pipeline import StepDefinition


class StepTracing(Protocol):
    def step_span(
        self, meta: ExecutionMeta, step: StepDefinition, attempt: int, worker_id: str
    ) -> AbstractContextManager[object]:
        """Entered around the executor call; a StepFailure / StepParked raised inside ends it."""
        ...


_NO_SPAN = nullcontext()  # keeps no state: one serves every step


class NoStepTracing:
    def step_span(
        self, meta: ExecutionMeta, step: StepDefinition, attempt: int, worker_id: str
    ) -> AbstractContextManager[object]:
        return _NO_SPAN
