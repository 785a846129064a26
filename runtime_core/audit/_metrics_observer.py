"""MetricsObserver: engine events -> RuntimeMetrics.

Owns the event-to-metric mapping and the in-process timing of step attempts (with the step
key the claim named) and executions. Must not do I/O.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from runtime_core.audit._attempts import AttemptKey, attempt_key, forget_execution, pop_attempt
from runtime_core.audit._metrics import RuntimeMetrics
from runtime_core.dag import EngineEvent

_STEP_OUTCOMES = {
    "step.completed": "completed",
    "step.failed": "failed",
    "step.retry_scheduled": "retry_scheduled",
    "step.parked": "parked",
    "step.transition_rejected": "rejected",
}


@dataclass(frozen=True)
class _Attempt:
    started: float
    step_key: str


class MetricsObserver:
    def __init__(self, metrics: RuntimeMetrics) -> None:
        self.metrics = metrics
        self._executions: dict[str, float] = {}
        self._attempts: dict[AttemptKey, _Attempt] = {}

    async def on_event(self, event: EngineEvent) -> None:
        now = time.monotonic()
        if event.name == "execution.created":
            self.metrics.executions_started.inc()
            self._executions[event.execution_id] = now
        elif event.name == "execution.finalized":
            self._finalized(event, now)
        elif event.name == "step.claimed":
            step_key = str(event.attributes.get("step_key", ""))
            self._attempts[attempt_key(event)] = _Attempt(now, step_key)
        elif event.name == "step.recovered":
            self.metrics.recoveries.labels(kind="stale_step").inc()
        elif event.name == "step.lease_denied":
            self.metrics.lease_denied(str(event.attributes.get("scope_key")))
        elif event.name == "step.admission_denied":
            self.metrics.lease_denied(f"admission:{event.attributes.get('policy')}")
        elif event.name in _STEP_OUTCOMES:
            self._step_outcome(event, _STEP_OUTCOMES[event.name], now)

    def _finalized(self, event: EngineEvent, now: float) -> None:
        status = str(event.attributes.get("status"))
        self.metrics.executions_finished.labels(status=status).inc()
        started = self._executions.pop(event.execution_id, None)
        if started is not None:
            self.metrics.execution_seconds.labels(status=status).observe(now - started)
        forget_execution(self._attempts, event.execution_id)

    def _step_outcome(self, event: EngineEvent, outcome: str, now: float) -> None:
        self.metrics.steps.labels(outcome=outcome).inc()
        usage = event.attributes.get("usage")
        if isinstance(usage, dict):
            self.metrics.tokens_used(usage)
        attempt = pop_attempt(self._attempts, event)
        step_key = attempt.step_key if attempt is not None else ""
        if event.name == "step.retry_scheduled":
            self.metrics.retries.labels(step_key=step_key).inc()
        elif event.name == "step.failed" and event.attributes.get("retries_exhausted"):
            self.metrics.retries_exhausted.labels(step_key=step_key).inc()
        if attempt is not None:
            histogram = self.metrics.step_seconds.labels(step_key=step_key, outcome=outcome)
            histogram.observe(now - attempt.started)
