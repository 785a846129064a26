"""MetricsObserver: engine events -> RuntimeMetrics.

Owns the event-to-metric mapping and the in-process timing of step attempts and
executions. Must not do I/O.
"""

from __future__ import annotations

import time

from prometheus_client import Histogram

from runtime_core.audit._metrics import RuntimeMetrics
from runtime_core.dag import EngineEvent

_STEP_OUTCOMES = {
    "step.completed": "completed",
    "step.failed": "failed",
    "step.retry_scheduled": "retry_scheduled",
    "step.parked": "parked",
    "step.transition_rejected": "rejected",
}


class MetricsObserver:
    def __init__(self, metrics: RuntimeMetrics) -> None:
        self.metrics = metrics
        self._started: dict[tuple[str, str | None, str | None], float] = {}

    async def on_event(self, event: EngineEvent) -> None:
        now = time.monotonic()
        if event.name == "execution.created":
            self.metrics.executions_started.inc()
            self._started[(event.execution_id, None, None)] = now
        elif event.name == "execution.finalized":
            self.metrics.executions_finished.labels(status=str(event.attributes.get("status"))).inc()
            self._observe(self.metrics.execution_seconds, (event.execution_id, None, None), now)
            self._forget(event.execution_id)
        elif event.name == "step.claimed":
            self._started[(event.execution_id, event.step_name, event.worker_id)] = now
        elif event.name == "step.recovered":
            self.metrics.recoveries.labels(kind="stale_step").inc()
        elif event.name == "step.lease_denied":
            self.metrics.lease_denied(str(event.attributes.get("scope_key")))
        elif event.name == "step.admission_denied":
            self.metrics.lease_denied(f"admission:{event.attributes.get('policy')}")
        elif event.name in _STEP_OUTCOMES:
            self.metrics.steps.labels(outcome=_STEP_OUTCOMES[event.name]).inc()
            usage = event.attributes.get("usage")
            if isinstance(usage, dict):
                self.metrics.tokens_used(usage)
            if event.name == "step.retry_scheduled":
                self.metrics.retries.inc()
            self._observe(
                self.metrics.step_seconds, (event.execution_id, event.step_name, event.worker_id), now
            )

    def _observe(self, histogram: Histogram, key: tuple[str, str | None, str | None], now: float) -> None:
        started = self._started.pop(key, None)
        if started is not None:
            histogram.observe(now - started)

    def _forget(self, execution_id: str) -> None:
        for key in [key for key in self._started if key[0] == execution_id]:
            del self._started[key]
