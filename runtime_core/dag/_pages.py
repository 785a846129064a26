"""Paged reads of one execution: a summary, then the rows of the steps asked for.

Owns `ExecutionPages`: the summary of an execution (its metadata, control status, waiting
input, how many steps are in each status, counted inside Redis, and the step that failed it)
and the views of a page of its steps (their status, retries, recoveries, last error and next
retry, without their results), each in one round trip whatever the execution's size: a
status read of a 100,000-step run moves a few numbers and one page, never every step.
Must not write.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime_core.dag._explain import WaitingInput, failing_step
from runtime_core.dag._store import (
    DagStore,
    ExecutionMeta,
    StepStatus,
    StepView,
    meta_from_hash,
    waiting_input,
)
from runtime_core.hot_state import reply_error


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


class ExecutionPages:
    def __init__(self, store: DagStore) -> None:
        self.store = store
        self._counts = store.hot_state.scripts["execution_step_counts"]

    async def summary(self, execution_id: str) -> ExecutionSummary | None:
        """None when the execution has no hot state."""
        k = self.store.keys(execution_id)
        counts = self._counts

        def queue(pipe: Any) -> None:
            pipe.hgetall(k.meta)
            pipe.hmget(k.control, "status", "waiting_key", "waiting_step", "reason", "updated_at_ms")
            counts.queue(pipe, [k.status], [])
            pipe.hgetall(k.error)

        async def read(replies: list[Any]) -> list[Any]:
            raw, control, counted, errors = replies
            for reply in (raw, control, errors):
                if isinstance(reply, BaseException):
                    raise reply_error("execution summary", reply)
            return [raw, control, await counts.settle([k.status], [], counted), errors]

        raw, control, counted, errors = await self.store.hot_state.coalescer.call(queue, read)
        meta = meta_from_hash(raw)
        if meta is None:
            return None
        pairs = int(counted[0])
        step_counts = {str(counted[1 + 2 * i]): int(counted[2 + 2 * i]) for i in range(pairs)}
        failed = await self._failed_step(meta, [str(name) for name in counted[1 + 2 * pairs :]], errors)
        return ExecutionSummary(meta, control[0], waiting_input(*control), step_counts, failed)

    async def _failed_step(
        self, meta: ExecutionMeta, failed: list[str], errors: dict[str, str]
    ) -> StepView | None:
        if not failed:
            return None
        keys = {step.name: step.step_key for step in meta.pipeline.steps}
        candidates = [
            StepView(
                name, keys.get(name, ""), StepStatus.FAILED, 0, 0, None, _decoded(errors.get(name)), False
            )
            for name in failed
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
        keys = {step.name: step.step_key for step in meta.pipeline.steps}
        return [
            StepView(
                name=name,
                step_key=keys.get(name, ""),
                status=status[i] or StepStatus.PENDING,
                retry_count=int(retries[i] or 0),
                recovery_count=int(recoveries[i] or 0),
                result=None,
                error=_decoded(errors[i]),
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


def _decoded(raw: str | None) -> Any:
    return None if raw is None else json.loads(raw)
