"""QueueReads: what the shared queue holds, read without changing it.

Owns reading one queue item and counting the Pending items: in all, of one tenant (one round
trip when the tenant's partition holds only its groups' items; another tenant's count is never
answered) and per tenant or admission group (how many, and when the oldest was first queued:
the metrics gauges' figures), read in batches across the queue's partitions. Must not run a
script nor write a key: the queue's transitions are `SharedQueue`'s.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from runtime_core.hot_state import HotState
from runtime_core.instances import admission_group_tenant
from runtime_core.queueing._keys import QueuePartition, SharedQueueKeys
from runtime_core.queueing._models import QueueItem

_ITEMS_PER_READ = 500


@dataclass(frozen=True)
class PendingGroup:
    """The Pending items of one admission group: how many, and the oldest's first enqueue time."""

    count: int
    oldest_enqueued_at_ms: int


class QueueReads:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self.keys = SharedQueueKeys(hot_state)

    async def item(self, shared_run_id: str) -> QueueItem | None:
        raw = await self.hot_state.redis.hget(self.keys.of_run(shared_run_id).items, shared_run_id)
        if raw is None:
            return None
        return QueueItem.model_validate({"shared_run_id": shared_run_id, **json.loads(raw)})

    async def pending_count(self) -> int:
        return sum([int(await self.hot_state.redis.zcard(k.pending)) for k in self.keys.partitions])

    async def pending_count_of_tenant(self, tenant_id: str) -> int:
        """Pending items of one tenant's runs (one tenant never learns another's count).

        One round trip when the tenant's partition holds Pending items of its own groups only
        (every group with a Pending item is in the partition's `group heads`: then all of the
        partition's Pending items are the tenant's); else every Pending item is read."""
        k = self.keys.of_tenant(tenant_id)

        def queue(pipe: Any) -> None:
            pipe.zrange(k.group_heads, 0, -1)
            pipe.zcard(k.pending)

        groups, pending = await self.hot_state.coalescer.commands(queue)
        if (groups or not pending) and all(admission_group_tenant(g) == tenant_id for g in groups):
            return int(pending)
        return _count_by_tenant(await self._pending_groups([k]))[tenant_id]

    async def pending_count_by_tenant(self) -> Counter[str]:
        """Pending items per tenant (the tenant of each item's admission group), read in batches.

        An item dispatched or cancelled between the two reads is not counted.
        """
        return _count_by_tenant(await self.pending_groups())

    async def pending_groups(self) -> dict[str, PendingGroup]:
        """Pending items per admission group: how many, and when the oldest was first queued."""
        return await self._pending_groups(self.keys.partitions)

    async def _pending_groups(self, partitions: list[QueuePartition]) -> dict[str, PendingGroup]:
        redis = self.hot_state.redis
        groups: dict[str, PendingGroup] = {}
        for k in partitions:
            run_ids = await redis.zrange(k.pending, 0, -1)
            for start in range(0, len(run_ids), _ITEMS_PER_READ):
                for raw in await redis.hmget(k.items, run_ids[start : start + _ITEMS_PER_READ]):
                    item = json.loads(raw) if raw is not None else {}
                    group = item.get("group")
                    if item.get("status") != "Pending" or not group:
                        continue
                    known = groups.get(group)
                    queued_ms = int(item.get("enqueued_at_ms") or 0)
                    groups[group] = PendingGroup(
                        count=(known.count if known else 0) + 1,
                        oldest_enqueued_at_ms=min(queued_ms, known.oldest_enqueued_at_ms)
                        if known
                        else queued_ms,
                    )
        return groups


def _count_by_tenant(groups: dict[str, PendingGroup]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for group, pending in groups.items():
        tenant_id = admission_group_tenant(group)
        if tenant_id is not None:
            counts[tenant_id] += pending.count
    return counts
