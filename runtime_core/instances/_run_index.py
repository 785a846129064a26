"""The run-execution index: LocalRunId -> ExecutionId, runtime instance, status, snapshot.

Owns the Redis records written by the instance that owns a local run, the pointers from
SharedRunId and ExecutionId to the latest LocalRunId, the per-tenant listing key, the
per-instance set of assigned local runs that recovery enumerates (not ended, or ended but
with their end not announced yet: a run leaves it only after its end event left), the set of
ended local runs (by end time) the lifecycle sweeper retires, retiring them (their records
expire, their memberships go), the settlement of shared-run dispatch attempts, and
`run_not_found`: the one answer an unknown id and another tenant's id both get (the control
plane's tenant-checked lookup raises it). Must not change local run state itself.

Dispatch attempts: each provider call of the shared-run dispatcher carries a fresh attempt
id. The attempt is settled once (HSETNX on one hash field per shared run): by the instance
that accepts it, with its LocalRunId, or by the dispatcher whose call failed, with
`ABANDONED_ATTEMPT`. Whoever writes first wins, so a dispatch whose reply was lost is either
known as accepted (and recorded as dispatched) or refused by the instance if it arrives
later (and requeued) - never both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from redis.asyncio.client import Pipeline

from runtime_core.errors import NotFoundError
from runtime_core.flow import FLOW_KEY_ATTRIBUTE
from runtime_core.hot_state import HotState, reply_error
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._models import LocalRunStatus

# The holder of a dispatch attempt the dispatcher gave up on (never a LocalRunId).
ABANDONED_ATTEMPT = "abandoned"


class RunIndexRecord(BaseModel):
    """One local run. `incarnation`: the instance incarnation that accepted it; `revision`
    counts its writes (compare-and-set); `taken_over_by`: the reconciler that sealed it."""

    local_run_id: str
    shared_run_id: str | None = None
    execution_id: str | None = None
    runtime_instance_id: str
    incarnation: str = ""
    revision: int = 0
    taken_over_by: str | None = None
    status: LocalRunStatus
    failure_reason: str | None = None
    created_at_ms: int
    started_at_ms: int | None = None
    completed_at_ms: int | None = None
    snapshot: ExecutionContextSnapshot
    metadata: dict[str, str] = Field(default_factory=dict)

    @property
    def tenant_id(self) -> str:
        return self.snapshot.tenant_id


@dataclass(frozen=True)
class RecordSwap:
    """A compare-and-set: `record` is the stored record after it (None when there is none)."""

    applied: bool
    record: RunIndexRecord | None


def run_not_found(any_id: str) -> NotFoundError:
    """The one answer for unknown and foreign ids alike."""
    return NotFoundError(
        f"Run '{any_id}' not found.", hint="Check the id; runs of other tenants are not visible."
    )


KeyRelease = Callable[[str, str], Awaitable[object]]
"""(shared run id, local run id) -> give back the concurrency-key slot the run held."""


class RunExecutionIndex:
    def __init__(self, hot_state: HotState, *, key_release: KeyRelease | None = None) -> None:
        self.hot_state = hot_state
        # Releases a concurrency key's slot when a run holding one ends (the queue's
        # `release_key`; the assembly sets it); None: such runs release through the lifecycle.
        self.key_release = key_release

    def _local_key(self, local_run_id: str) -> str:
        return self.hot_state.key("runindex", "local", local_run_id)

    def _pointer_key(self, kind: str, value: str) -> str:
        return self.hot_state.key("runindex", kind, value)

    def _tenant_key(self, tenant_id: str) -> str:
        return self.hot_state.key("runindex", "tenant", tenant_id)

    def _assigned_key(self, runtime_instance_id: str) -> str:
        return self.hot_state.key("runindex", "instance", runtime_instance_id, "assigned")

    def _attempts_key(self, shared_run_id: str) -> str:
        return self.hot_state.key("runindex", "attempts", shared_run_id)

    @property
    def ended_key(self) -> str:
        """Local runs that reached a terminal status, scored by when they ended."""
        return self.hot_state.key("runindex", "ended")

    async def put(self, record: RunIndexRecord) -> None:
        """Write a new (or restored) record; the SharedRunId pointer moves to it."""
        pipe = self.hot_state.redis.pipeline(transaction=False)
        self._queue_put(pipe, record, point_shared=True)
        await pipe.execute()

    async def put_accepted(self, record: RunIndexRecord, attempt_id: str) -> str:
        """Write a newly accepted run's record, then settle its dispatch attempt for it.

        Returns the attempt's holder: the record's LocalRunId, or whoever settled it first
        (`ABANDONED_ATTEMPT`, or an earlier LocalRunId). One round trip: the record is written
        before the settlement in the same pipeline, so a holder LocalRunId has its record.
        """
        shared_run_id = record.shared_run_id
        assert shared_run_id, "a dispatch attempt belongs to a shared run"

        def queue(pipe: Pipeline) -> None:
            self._queue_put(pipe, record, point_shared=True)
            self._queue_settle(pipe, shared_run_id, attempt_id, record.local_run_id)

        # Coalesced: the runs of a claim batch are accepted together.
        replies = await self.hot_state.coalescer.commands(queue)
        return str(replies[-1])

    async def abandon_attempt(self, shared_run_id: str, attempt_id: str) -> str:
        """Give up a dispatch attempt whose outcome is unknown; its holder is returned.

        `ABANDONED_ATTEMPT` when no instance had accepted it (one that receives it later
        refuses it); otherwise the LocalRunId of the instance run that accepted it.
        """
        pipe = self.hot_state.redis.pipeline(transaction=False)
        self._queue_settle(pipe, shared_run_id, attempt_id, ABANDONED_ATTEMPT)
        replies = await pipe.execute()
        return str(replies[-1])

    def _queue_settle(self, pipe: Pipeline, shared_run_id: str, attempt_id: str, holder: str) -> None:
        """First writer wins; the read returns the holder either way (it never changes after)."""
        key = self._attempts_key(shared_run_id)
        pipe.hsetnx(key, attempt_id, holder)
        pipe.hget(key, attempt_id)

    async def holds_attempt(self, shared_run_id: str, local_run_id: str) -> bool:
        """Whether `local_run_id` was accepted for one of the shared run's dispatch attempts."""
        return local_run_id in await self.hot_state.redis.hvals(self._attempts_key(shared_run_id))

    async def settle_attempts(self, shared_run_id: str, attempt_ids: list[str]) -> list[str]:
        """Abandon every unsettled one of `attempt_ids`; their holders, in order (one round trip)."""
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for attempt_id in attempt_ids:
            self._queue_settle(pipe, shared_run_id, attempt_id, ABANDONED_ATTEMPT)
        replies = await pipe.execute()
        return [str(holder) for holder in replies[1::2]]

    def _queue_put(
        self, pipe: Pipeline, record: RunIndexRecord, *, point_shared: bool, announced: bool = True
    ) -> None:
        pipe.set(self._local_key(record.local_run_id), record.model_dump_json())
        self._queue_links(pipe, record, point_shared=point_shared, announced=announced)

    def _queue_links(
        self, pipe: Pipeline, record: RunIndexRecord, *, point_shared: bool, announced: bool = True
    ) -> None:
        """Pointers and listings of a written record (the record itself is written by the caller).
        A terminal record not `announced` stays assigned (see `leave_assigned`)."""
        if record.shared_run_id and point_shared:
            pipe.set(self._pointer_key("shared", record.shared_run_id), record.local_run_id)
        if record.execution_id:
            pipe.set(self._pointer_key("execution", record.execution_id), record.local_run_id)
        pipe.zadd(self._tenant_key(record.tenant_id), {record.local_run_id: record.created_at_ms})
        assigned = self._assigned_key(record.runtime_instance_id)
        if record.status.is_terminal and not announced:
            return
        if record.status.is_terminal:
            pipe.zrem(assigned, record.local_run_id)
            # NX: re-writing a terminal record never moves a retirement a sweeper has leased.
            ended_at = record.completed_at_ms or record.created_at_ms
            pipe.zadd(self.ended_key, {record.local_run_id: ended_at}, nx=True)
        else:
            pipe.zadd(assigned, {record.local_run_id: record.created_at_ms})

    async def retire(self, record: RunIndexRecord, retention_ms: int) -> None:
        """An ended local run leaves the listings; its records expire after `retention_ms`.

        The SharedRunId / ExecutionId pointers (and the shared run's dispatch attempts) expire
        only while they still name this local run: a later attempt keeps its own.
        """
        redis = self.hot_state.redis
        owned: list[str] = []
        if record.shared_run_id:
            shared_pointer = self._pointer_key("shared", record.shared_run_id)
            if await redis.get(shared_pointer) == record.local_run_id:
                owned += [shared_pointer, self._attempts_key(record.shared_run_id)]
        if record.execution_id:
            execution_pointer = self._pointer_key("execution", record.execution_id)
            if await redis.get(execution_pointer) == record.local_run_id:
                owned.append(execution_pointer)
        pipe = redis.pipeline(transaction=False)
        for key in (self._local_key(record.local_run_id), *owned):
            pipe.pexpire(key, retention_ms)
        pipe.zrem(self._tenant_key(record.tenant_id), record.local_run_id)
        pipe.zrem(self._assigned_key(record.runtime_instance_id), record.local_run_id)
        pipe.zrem(self.ended_key, record.local_run_id)
        await pipe.execute()

    async def forget_ended(self, local_run_id: str) -> None:
        """Drop an ended entry whose record is gone (expired or never written)."""
        await self.hot_state.redis.zrem(self.ended_key, local_run_id)

    async def update(
        self, record: RunIndexRecord, *, announced: bool = True, **changes: Any
    ) -> RunIndexRecord:
        """Overwrite a record this caller alone writes (recovery after sealing it, a refused run).
        A run ended with `announced=False` stays assigned until `leave_assigned`."""
        updated = record.model_copy(update={**changes, "revision": record.revision + 1})
        pipe = self.hot_state.redis.pipeline(transaction=False)
        self._queue_put(pipe, updated, point_shared=False, announced=announced)
        await pipe.execute()
        if announced and updated.status.is_terminal and not record.status.is_terminal:
            await self._release_key(updated)
        return updated

    async def leave_assigned(self, record: RunIndexRecord) -> None:
        """An ended local run whose end was announced leaves its instance's assigned set for
        the ended one (the lifecycle sweeper retires it from there), and gives back the
        concurrency-key slot its shared run held."""
        await self.hot_state.coalescer.commands(
            lambda pipe: self._queue_links(pipe, record, point_shared=False)
        )
        await self._release_key(record)

    async def _release_key(self, ended: RunIndexRecord) -> None:
        """The run ended: the concurrency-key slot its shared run held goes back (the queue
        checks that the shared run ended as this local run)."""
        if self.key_release is not None and ended.shared_run_id and ended.metadata.get(FLOW_KEY_ATTRIBUTE):
            await self.key_release(ended.shared_run_id, ended.local_run_id)

    async def swap(self, expected: RunIndexRecord, **changes: Any) -> RecordSwap:
        """Compare-and-set: apply `changes` only if the stored record is still `expected`.

        Only the links the changes move are written: an ExecutionId the swap introduces is one
        the run just chose (a resumed run's record names its execution from its acceptance),
        so no other run's pointer can be overwritten and its pointer goes out in the swap's
        own round trip (removed again when the swap is refused); a run that ends stays in its
        instance's assigned set until its end is announced (`leave_assigned`)."""
        updated = expected.model_copy(update={**changes, "revision": expected.revision + 1})
        introduced = updated.execution_id if updated.execution_id != expected.execution_id else None
        reply = await self._swap_pointing(expected, updated, introduced)
        code = int(reply[0])
        if code in (1, 2):
            return RecordSwap(True, updated)
        if introduced:
            await self.hot_state.redis.delete(self._pointer_key("execution", introduced))
        current = RunIndexRecord.model_validate_json(reply[2]) if code == 0 else None
        return RecordSwap(False, current)

    async def _swap_pointing(
        self, expected: RunIndexRecord, updated: RunIndexRecord, introduced: str | None
    ) -> list[Any]:
        """The `run_index_swap` reply, with the pointer of `introduced` written first in the
        same round trip (coalesced: the runs of a batch start together)."""
        script = self.hot_state.scripts["run_index_swap"]
        keys, args = [self._local_key(expected.local_run_id)], [expected.revision, updated.model_dump_json()]
        if introduced is None:
            return list(await self.hot_state.coalesced("run_index_swap")(keys, args))
        pointer = self._pointer_key("execution", introduced)

        def queue(pipe: Pipeline) -> None:
            pipe.set(pointer, updated.local_run_id)
            script.queue(pipe, keys, args)

        async def read(replies: list[Any]) -> list[Any]:
            pointed, swapped = replies
            reply = list(await script.settle(keys, args, swapped))
            if isinstance(pointed, BaseException):  # a retried swap (reply 2) writes it again
                raise reply_error("run index pointer", pointed)
            return reply

        return await self.hot_state.coalescer.call(queue, read)

    async def seal(self, record: RunIndexRecord, reconciler_id: str) -> RunIndexRecord | None:
        """Take a dead incarnation's record over; None when it changed since it was read."""
        if record.taken_over_by:
            return record
        swapped = await self.swap(record, taken_over_by=reconciler_id)
        return swapped.record if swapped.applied else None

    async def get_local(self, local_run_id: str) -> RunIndexRecord | None:
        raw = await self.hot_state.redis.get(self._local_key(local_run_id))
        return RunIndexRecord.model_validate_json(raw) if raw else None

    async def get_many_local(self, local_run_ids: list[str]) -> dict[str, RunIndexRecord]:
        """The records that exist among `local_run_ids`, by LocalRunId (one round trip)."""
        if not local_run_ids:
            return {}
        # One GET per key in a pipeline (not MGET): the keys live in different Cluster slots.
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for local_run_id in local_run_ids:
            pipe.get(self._local_key(local_run_id))
        raws = await pipe.execute()
        records = (RunIndexRecord.model_validate_json(raw) for raw in raws if raw)
        return {record.local_run_id: record for record in records}

    async def _follow(self, kind: str, value: str) -> RunIndexRecord | None:
        local_run_id = await self.hot_state.redis.get(self._pointer_key(kind, value))
        return await self.get_local(local_run_id) if local_run_id else None

    async def get_by_shared(self, shared_run_id: str) -> RunIndexRecord | None:
        return await self._follow("shared", shared_run_id)

    async def get_by_execution(self, execution_id: str) -> RunIndexRecord | None:
        return await self._follow("execution", execution_id)

    async def find(self, any_id: str) -> RunIndexRecord | None:
        """Look an id up by its prefix kind (lrun_, srun_, exec_); None when unknown."""
        if any_id.startswith("lrun_"):
            return await self.get_local(any_id)
        if any_id.startswith("srun_"):
            return await self.get_by_shared(any_id)
        if any_id.startswith("exec_"):
            return await self.get_by_execution(any_id)
        return None

    async def assigned_to(self, runtime_instance_id: str) -> list[RunIndexRecord]:
        """The local runs one instance has not ended, or ended without announcing their end:
        what recovery must take over if it dies."""
        ids = await self.hot_state.redis.zrange(self._assigned_key(runtime_instance_id), 0, -1)
        records = [await self.get_local(local_run_id) for local_run_id in ids]
        return [r for r in records if r is not None]

    async def list_tenant(
        self, snapshot: ExecutionContextSnapshot, *, limit: int = 100
    ) -> list[RunIndexRecord]:
        ids = await self.hot_state.redis.zrevrange(self._tenant_key(snapshot.tenant_id), 0, limit - 1)
        records = [await self.get_local(local_run_id) for local_run_id in ids]
        return [r for r in records if r is not None]
