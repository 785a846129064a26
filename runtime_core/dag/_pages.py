"""Paged reads of one execution: a summary, then the rows of the steps asked for.

Owns `ExecutionPages`: the summary of an execution (its metadata, control status, waiting
input, how many steps are in each status and the step that failed it, gathered inside Redis by
`lua/execution_summary.lua`) and the views of a page of its steps (their status, retries,
recoveries, last error and next retry, without their results), each in one round trip whatever
the execution's size: a status read of a 100,000-step run moves a few numbers and one page,
never every step, and leaves the pipeline's text in Redis once its reader holds it parsed.
Must not write.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime_core.dag._explain import WaitingInput, failing_step
from runtime_core.dag._records import (
    ExecutionMeta,
    StepStatus,
    StepView,
    decoded_json,
    meta_from_hash,
    waiting_input,
)
from runtime_core.dag._store import DagStore
from runtime_core.pipeline import PipelineDefinition


@dataclass(frozen=True)
class ExecutionSummary:
    meta: ExecutionMeta
    control_status: str | None
    waiting: WaitingInput | None
    step_counts: dict[str, int]
    failed_step: StepView | None  # the step whose failure failed the execution (earliest), if any

    @property
    def steps_total(self) -> int:
        return len(self.meta.pipeline.steps)


PIPELINES_KEPT = 64
"""Executions whose parsed pipeline a reader keeps (a pipeline never changes for its
ExecutionId): the summary of a kept one leaves the pipeline's text in Redis, so paging through
a 100,000-step run does not move its 8 MB definition once per page."""


class ExecutionPages:
    def __init__(self, store: DagStore) -> None:
        self.store = store
        self._summary = store.hot_state.scripts["execution_summary"]
        self._pipelines: OrderedDict[str, PipelineDefinition] = OrderedDict()

    async def summary(self, execution_id: str, *, counts: bool = True) -> ExecutionSummary | None:
        """None when the execution has no hot state. `counts`: count the steps per status (a
        walk of every step's status inside Redis; else `step_counts` is empty)."""
        k = self.store.keys(execution_id)
        known = self._pipelines.get(execution_id)
        reply = await self.store.hot_state.coalesced("execution_summary")(
            [k.meta, k.control, k.status, k.error], ["1" if known is not None else "", "1" if counts else ""]
        )
        if not reply:
            return None
        raw_meta, control, counted, failed = reply
        meta = meta_from_hash(dict(zip(raw_meta[::2], raw_meta[1::2], strict=True)), known)
        if meta is None:
            return None
        self._keep(meta)
        step_counts = {str(counted[i]): int(counted[i + 1]) for i in range(0, len(counted), 2)}
        failing = await self._failing(meta, dict(zip(failed[::2], failed[1::2], strict=True)))
        return ExecutionSummary(meta, control[0], waiting_input(*control), step_counts, failing)

    def _keep(self, meta: ExecutionMeta) -> None:
        self._pipelines[meta.execution_id] = meta.pipeline
        self._pipelines.move_to_end(meta.execution_id)
        while len(self._pipelines) > PIPELINES_KEPT:
            self._pipelines.popitem(last=False)

    async def _failing(self, meta: ExecutionMeta, errors: dict[str, str | None]) -> StepView | None:
        """The step whose failure failed the execution (the earliest of its Failed steps)."""
        if not errors:
            return None
        keys = meta.pipeline.step_keys()
        candidates = [
            StepView(name, keys.get(name, ""), StepStatus.FAILED, 0, 0, None, decoded_json(error), False)
            for name, error in errors.items()
        ]
        first = failing_step(candidates)
        return (await self.steps(meta, [first.name]))[0] if first is not None else None

    async def steps(self, meta: ExecutionMeta, names: Sequence[str]) -> list[StepView]:
        """The views of the steps `names` (results not read), in that order."""
        if not names:
            return []
        k = self.store.keys(meta.execution_id)
        names = list(names)

        def queue(pipe: Any) -> None:
            for key in (k.status, k.retries, k.recoveries, k.error, k.token, k.claimed):
                pipe.hmget(key, names)
            pipe.zmscore(k.ready, names)

        replies = await self.store.hot_state.coalescer.commands(queue)
        status, retries, recoveries, errors, tokens, claimed, ready = replies
        keys = meta.pipeline.step_keys()
        return [
            StepView(
                name=name,
                step_key=keys.get(name, ""),
                status=status[i] or StepStatus.PENDING,
                retry_count=int(retries[i] or 0),
                recovery_count=int(recoveries[i] or 0),
                result=None,
                error=decoded_json(errors[i]),
                owned=tokens[i] is not None,
                next_retry_at_ms=int(ready[i])
                if status[i] == "WaitingForRetry" and ready[i] is not None
                else None,
                claimed_at_ms=int(claimed[i]) if status[i] == "Running" and claimed[i] else None,
            )
            for i, name in enumerate(names)
        ]

    async def results(self, execution_id: str, names: Sequence[str]) -> dict[str, Any]:
        """The stored results of the steps `names` that have one (as stored: references stay)."""
        if not names:
            return {}
        values = await self.store.hot_state.redis.hmget(self.store.keys(execution_id).result, list(names))
        return {name: json.loads(raw) for name, raw in zip(names, values, strict=True) if raw is not None}


def _retry_at(status: str | None, eligible_at: float | None) -> int | None:
    """While WaitingForRetry: when it may be claimed again."""
    return int(eligible_at) if status == "WaitingForRetry" and eligible_at is not None else None
