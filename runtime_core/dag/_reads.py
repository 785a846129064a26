"""The read-only views of an execution's hot DAG state: statuses, metadata, attributes and
the whole execution as stored (`read_execution`, whose commands can also ride in another
pipeline: `queue_view` / `view_from`).

Owns the reads and turning their replies into the `_records` values. Must not write: every
write goes through a Lua script of `DagStore`.
"""

from __future__ import annotations

from typing import Any

from runtime_core.dag._keys import CANCELLED_CONTROL_STATUSES, ExecutionKeys
from runtime_core.dag._records import (
    ExecutionMeta,
    ExecutionView,
    StepStatus,
    StepView,
    claimed_at,
    decoded_json,
    meta_from_hash,
    waiting_input,
)
from runtime_core.hot_state import HotState
from runtime_core.pipeline import PipelineDefinition


class ExecutionReads:
    """Mixed into DagStore, which provides the hot state and the keys of an execution."""

    hot_state: HotState

    def keys(self, execution_id: str) -> ExecutionKeys:
        raise NotImplementedError

    async def execution_status(self, execution_id: str) -> str | None:
        return await self.hot_state.redis.hget(self.keys(execution_id).meta, "status")

    async def control_status(self, execution_id: str) -> str | None:
        return await self.hot_state.redis.hget(self.keys(execution_id).control, "status")

    async def is_cancelled(self, execution_id: str) -> bool:
        """Whether the execution was cancelled (Cancelling or Cancelled)."""
        return await self.control_status(execution_id) in CANCELLED_CONTROL_STATUSES

    async def control_statuses(self, execution_ids: list[str]) -> dict[str, str | None]:
        """The control status of each execution, in one pipelined round trip (run listings)."""
        if not execution_ids:
            return {}
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for execution_id in execution_ids:
            pipe.hget(self.keys(execution_id).control, "status")
        return dict(zip(execution_ids, await pipe.execute(), strict=True))

    async def load_meta(self, execution_id: str) -> ExecutionMeta | None:
        return meta_from_hash(await self.hot_state.redis.hgetall(self.keys(execution_id).meta))

    async def load_attributes(self, execution_id: str, *names: str) -> dict[str, str | None]:
        """A few attributes of the execution's metadata (one HMGET; None where absent)."""
        values = await self.hot_state.redis.hmget(self.keys(execution_id).meta, list(names))
        return dict(zip(names, values, strict=True))

    async def read_execution(self, execution_id: str) -> ExecutionView | None:
        """The whole execution as stored now, in one round trip (shared with other calls)."""
        k = self.keys(execution_id)
        replies = await self.hot_state.coalescer.commands(lambda pipe: queue_view(pipe, k))
        return view_from(replies)


def queue_view(pipe: Any, k: ExecutionKeys) -> None:
    """The reads of `read_execution` (their replies make the view: `_view_from`)."""
    pipe.hgetall(k.meta)
    for key in (k.status, k.retries, k.recoveries, k.result, k.error, k.token):
        pipe.hgetall(key)
    pipe.zrange(k.ready, 0, -1, withscores=True)
    pipe.hmget(k.control, "status", "waiting_key", "waiting_step", "reason", "updated_at_ms")
    pipe.hgetall(k.claimed)


def view_from(replies: list[Any], pipeline: PipelineDefinition | None = None) -> ExecutionView | None:
    """The view from the replies of `_queue_view` (`pipeline`: the execution's, parsed already)."""
    raw, status, retries, recoveries, results, errors, tokens, ready, control, claimed = replies
    meta = meta_from_hash(raw, pipeline)
    if meta is None:
        return None
    eligible_at = {name: int(score) for name, score in ready}
    steps = [
        StepView(
            name=s.name,
            step_key=s.step_key,
            status=status.get(s.name, StepStatus.PENDING),
            retry_count=int(retries.get(s.name, 0)),
            recovery_count=int(recoveries.get(s.name, 0)),
            result=decoded_json(results.get(s.name)),
            error=decoded_json(errors.get(s.name)),
            owned=s.name in tokens,
            next_retry_at_ms=eligible_at.get(s.name) if status.get(s.name) == "WaitingForRetry" else None,
            claimed_at_ms=claimed_at(claimed, s.name) if status.get(s.name) == "Running" else None,
        )
        for s in meta.pipeline.steps
    ]
    return ExecutionView(meta, steps, control[0], waiting_input(*control))
