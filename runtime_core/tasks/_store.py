"""TaskStore: the Redis layout of task records and the typed wrappers of their Lua scripts.

Key layout (prefix `mcprt:` by default):
- `{task_<id>}:task`        HASH  one task record, under the task's own hash tag; Redis
                                  deletes it when the task's TTL ends (set at creation);
- `{tasks:<tenant>}:index`  ZSET  the tenant's task ids for listings, every member at score 0
                                  as `<created_at_ms, 15 digits>:<task id>` so a lexicographic
                                  range is creation order; members of expired tasks are pruned
                                  when a listing meets them, the index itself expires after
                                  its longest-lived task.
`task_create` and `task_transition` are the only writers of a task hash. Must not decide
tenancy or statuses: the TaskService does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from runtime_core.hot_state import HotState
from runtime_core.tasks._errors import InvalidTaskCursorError
from runtime_core.tasks._models import TaskRecord, TaskStatus

_INDEX_MEMBER = re.compile(r"^\d{15}:task_[0-9a-f]{32}$")


class TransitionOutcome(Enum):
    MOVED = 1
    UNCHANGED = 2
    TERMINAL = 3
    MISSING = -1


@dataclass(frozen=True)
class TaskTransition:
    outcome: TransitionOutcome
    status: TaskStatus | None = None
    last_updated_at_ms: int | None = None


@dataclass(frozen=True)
class TaskKeys:
    hot_state: HotState

    def task(self, task_id: str) -> str:
        return self.hot_state.tagged(task_id, "task")

    def tenant_index(self, tenant_id: str) -> str:
        return self.hot_state.tagged(f"tasks:{tenant_id}", "index")


class TaskStore:
    def __init__(self, hot_state: HotState) -> None:
        self.keys = TaskKeys(hot_state)
        self._redis = hot_state.redis
        self._create = hot_state.scripts["task_create"]
        self._transition = hot_state.scripts["task_transition"]

    async def create(self, record: TaskRecord) -> TaskRecord | None:
        """Store a new record (status working, server-clock timestamps) and list it for its
        tenant; None when the id is taken (nothing changed)."""
        pairs = [item for field in record.fields().items() for item in field]
        reply = await self._create(keys=[self.keys.task(record.task_id)], args=[record.ttl_ms, *pairs])
        if int(reply[0]) != 1:
            return None
        now = int(reply[1])
        created = record.model_copy(update={"created_at_ms": now, "last_updated_at_ms": now})
        await self._index(created)
        return created

    async def _index(self, record: TaskRecord) -> None:
        index = self.keys.tenant_index(record.tenant_id)
        pipe = self._redis.pipeline(transaction=False)
        pipe.zadd(index, {_index_member(record): 0})
        pipe.pexpire(index, record.ttl_ms, nx=True)
        pipe.pexpire(index, record.ttl_ms, gt=True)
        await pipe.execute()

    async def load(self, task_id: str) -> TaskRecord | None:
        fields = await self._redis.hgetall(self.keys.task(task_id))
        return TaskRecord.from_fields(fields) if fields else None

    async def transition(self, task_id: str, status: TaskStatus) -> TaskTransition:
        reply = await self._transition(keys=[self.keys.task(task_id)], args=[status.value])
        outcome = TransitionOutcome(int(reply[0]))
        if outcome is TransitionOutcome.MISSING:
            return TaskTransition(outcome)
        return TaskTransition(outcome, TaskStatus(str(reply[2])), int(reply[3]))

    async def page(
        self, tenant_id: str, cursor: str | None, limit: int
    ) -> tuple[list[TaskRecord], str | None]:
        """The tenant's live tasks, newest first, after `cursor` (the last member of the page before)."""
        if cursor is not None and not _INDEX_MEMBER.match(cursor):
            raise InvalidTaskCursorError()
        index = self.keys.tenant_index(tenant_id)
        upper = f"({cursor}" if cursor else "+"
        members: list[str] = await self._redis.zrevrangebylex(index, upper, "-", start=0, num=limit + 1)
        page, more = members[:limit], len(members) > limit
        records = await self._records(index, page)
        return records, (page[-1] if more else None)

    async def _records(self, index: str, members: list[str]) -> list[TaskRecord]:
        pipe = self._redis.pipeline(transaction=False)
        for member in members:
            pipe.hgetall(self.keys.task(member.split(":", 1)[1]))
        records, expired = [], []
        for member, fields in zip(members, await pipe.execute(), strict=True):
            if fields:
                records.append(TaskRecord.from_fields(fields))
            else:
                expired.append(member)
        if expired:
            await self._redis.zrem(index, *expired)
        return records


def _index_member(record: TaskRecord) -> str:
    return f"{record.created_at_ms:015d}:{record.task_id}"
