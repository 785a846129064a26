"""ResultCompactor: one retention pass over an execution's hot results.

Owns the trigger stats read (one pipelined round trip), the pass plan (which Completed
results to compact or evict), archiving them durably first, and the typed wrapper of
`lua/compact_results.lua`, the only place that knows its KEYS/ARGV order. Must not decide
whether a pass is due: the retention engine does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from runtime_core.dag import DagStore, StepStatus
from runtime_core.hot_state import time_reply_ms
from runtime_core.pipeline import PipelineDefinition, steps_read_by
from runtime_core.retention._archive import StepArchiver
from runtime_core.retention._engine import RetentionDecision, RetentionStats
from runtime_core.retention._refs import REF_MARKER
from runtime_core.steps import canonical_json

RETENTION_WATERMARK = "retention_completed_at"
_REF_PREFIX = '{"' + REF_MARKER + '"'


class CompactionOutcome(Enum):
    APPLIED = 1
    EXECUTION_MISSING = -1


@dataclass(frozen=True)
class CompactionReport:
    outcome: CompactionOutcome
    compacted: int = 0
    evicted: int = 0
    skipped: int = 0


def result_readers(pipeline: PipelineDefinition) -> dict[str, list[str]]:
    """Step -> the steps whose bindings read its result (eviction waits for all of them)."""
    readers: dict[str, list[str]] = {step.name: [] for step in pipeline.steps}
    for step in pipeline.steps:
        for source in steps_read_by(step):
            readers[source].append(step.name)
    return readers


class ResultCompactor:
    def __init__(self, dag_store: DagStore, archiver: StepArchiver) -> None:
        self.dag_store = dag_store
        self.archiver = archiver

    async def stats(self, execution_id: str) -> RetentionStats | None:
        """Read after each completion: one round trip shared with the process's other calls,
        of constant cost (the hot results' bytes are Redis's sampled estimate, not a walk of a
        hash that may hold thousands of results)."""
        keys = self.dag_store.keys(execution_id)
        hot_state = self.dag_store.hot_state

        def queue(pipe: Any) -> None:
            pipe.hmget(keys.meta, ["completed_count", "created_at_ms", RETENTION_WATERMARK])
            pipe.memory_usage(keys.result)
            hot_state.queue_server_time(pipe, keys.meta)

        (completed, created_at, watermark), result_bytes, now = await hot_state.coalescer.commands(queue)
        if created_at is None:
            return None
        completed_count = int(completed or 0)
        return RetentionStats(
            completed_count=completed_count,
            completed_since_pass=completed_count - int(watermark or 0),
            hot_result_bytes=int(result_bytes or 0),
            age_ms=time_reply_ms(now) - int(created_at),
        )

    async def apply(
        self,
        execution_id: str,
        tenant_id: str,
        decision: RetentionDecision,
        readers: dict[str, list[str]],
    ) -> CompactionReport:
        keys = self.dag_store.keys(execution_id)
        redis = self.dag_store.hot_state.redis
        # The results still hot (evicted ones are gone), then the statuses of their steps and
        # readers: a pass costs what is hot, not the whole execution.
        results = await redis.hgetall(keys.result)
        names = sorted(results)
        involved = sorted({*names, *(r for name in names for r in readers.get(name, []))})
        pipe = redis.pipeline(transaction=False)
        pipe.hmget(keys.status, involved)
        pipe.hmget(keys.retries, names)
        status_values, retry_values = await pipe.execute() if names else ([], [])
        statuses = {name: status for name, status in zip(involved, status_values, strict=True) if status}
        retries = {name: count for name, count in zip(names, retry_values, strict=True) if count}
        actions = []
        for step, text in sorted(results.items()):
            if statuses.get(step) != StepStatus.COMPLETED:
                continue
            action = await self._archive_for(
                execution_id, tenant_id, decision, step, text, int(retries.get(step, 0)), statuses, readers
            )
            if action is not None:
                actions.append(action)
        return await self._run_script(execution_id, actions)

    async def _archive_for(
        self,
        execution_id: str,
        tenant_id: str,
        decision: RetentionDecision,
        step: str,
        text: str,
        retry_count: int,
        statuses: dict[str, str],
        readers: dict[str, list[str]],
    ) -> dict[str, Any] | None:
        step_readers = readers.get(step, [])
        is_ref = text.startswith(_REF_PREFIX)
        large = len(text) >= decision.compact_min_bytes
        evict = decision.strategy.evicts and all(
            statuses.get(r) == StepStatus.COMPLETED for r in step_readers
        )
        if not evict and (not decision.strategy.compacts or is_ref or not large):
            return None
        stored = await self.archiver.archive(
            execution_id,
            tenant_id,
            step,
            status=StepStatus.COMPLETED,
            retry_count=retry_count,
            stored=json.loads(text),
            externalize=large and not is_ref,
        )
        sha1 = hashlib.sha1(text.encode("utf-8")).hexdigest()
        if evict:
            return {"step": step, "action": "evict", "sha1": sha1, "readers": step_readers}
        return {"step": step, "action": "compact", "sha1": sha1, "ref": canonical_json(stored)}

    async def _run_script(self, execution_id: str, actions: list[dict[str, Any]]) -> CompactionReport:
        keys = self.dag_store.keys(execution_id)
        reply = await self.dag_store.hot_state.scripts["compact_results"](
            keys=[keys.meta, keys.status, keys.result], args=[json.dumps(actions)]
        )
        outcome = CompactionOutcome(int(reply[0]))
        if outcome is not CompactionOutcome.APPLIED:
            return CompactionReport(outcome)
        return CompactionReport(outcome, int(reply[2]), int(reply[3]), int(reply[4]))
