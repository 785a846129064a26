"""RetentionObserver: runs a retention pass when a completed step makes a trigger fire.

Owns the per-execution plan cache (parsed `config.retention` and result readers) and the
per-execution lock that serializes this process's passes, which also makes completing
workers wait for a running pass: that back-pressure is what bounds Redis memory. Must never
raise into the engine: a failed pass is logged and retried on the next completion.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from runtime_core.dag import DagStore, EngineEvent, ExecutionMeta
from runtime_core.errors import InvalidPipelineError
from runtime_core.retention._compaction import ResultCompactor, result_readers
from runtime_core.retention._config import RetentionConfig
from runtime_core.retention._engine import RetentionEngine
from runtime_core.retention._metrics import NullRetentionMetrics, RetentionMetrics
from runtime_core.retention._refs import tenant_of

log = logging.getLogger("runtime_core.retention")

MAX_TRACKED_EXECUTIONS = 1024


@dataclass
class _Plan:
    config: RetentionConfig | None
    readers: dict[str, list[str]]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class RetentionObserver:
    """An ExecutionObserver reacting to `step.completed` and `execution.finalized`."""

    def __init__(
        self,
        dag_store: DagStore,
        engine: RetentionEngine,
        compactor: ResultCompactor,
        metrics: RetentionMetrics | None = None,
    ) -> None:
        self.dag_store = dag_store
        self.engine = engine
        self.compactor = compactor
        self.metrics: RetentionMetrics = metrics or NullRetentionMetrics()
        self._plans: OrderedDict[str, _Plan] = OrderedDict()

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "execution.finalized":
            self._plans.pop(event.execution_id, None)
        elif event.name == "step.completed":
            try:
                await self._after_completion(event)
            except Exception:  # an observer must never crash the engine's worker
                log.exception("retention.pass_failed", extra={"execution_id": event.execution_id})

    async def _after_completion(self, event: EngineEvent) -> None:
        plan = await self._plan(event.execution_id, event.meta)
        if plan is None or plan.config is None:
            return
        async with plan.lock:
            stats = await self.compactor.stats(event.execution_id)
            decision = self.engine.decide(plan.config, stats) if stats is not None else None
            if decision is None:
                return
            started = time.perf_counter()
            report = await self.compactor.apply(
                event.execution_id, tenant_of(event.snapshot), decision, plan.readers
            )
            self.metrics.retention_pass(decision.strategy, decision.trigger, time.perf_counter() - started)
            self.metrics.retention_action("compact", report.compacted)
            self.metrics.retention_action("evict", report.evicted)

    async def _plan(self, execution_id: str, meta: ExecutionMeta | None) -> _Plan | None:
        """The execution's plan, from the metadata the event carries (else read once)."""
        plan = self._plans.get(execution_id)
        if plan is not None:
            self._plans.move_to_end(execution_id)
            return plan
        meta = meta or await self.dag_store.load_meta(execution_id)
        if meta is None:
            return None
        try:
            config = self.engine.validate(meta.pipeline.config)
        except InvalidPipelineError as exc:
            log.warning("retention.config_invalid %s", exc, extra={"execution_id": execution_id})
            config = None
        plan = _Plan(config, result_readers(meta.pipeline))
        self._plans[execution_id] = plan
        while len(self._plans) > MAX_TRACKED_EXECUTIONS:
            self._plans.popitem(last=False)
        return plan
