"""Redis key layout of the shared run store and shared queue: its partitions and their keys.

The shared queue is split into `HotState.partition_count` partitions (1 on a single Redis,
16 on a Redis Cluster), each under its own hash tag: partition 0 is `{squeue}` (the layout
of an unpartitioned queue, unchanged), partition k is `{squeue:k}`. A tenant's runs all
live in one partition (a stable hash of the tenant id), and a shared run id names its
partition (`shared_run_partition`), so every shared-queue script touches one Cluster slot:
a partition holds its run records, item table, pending and claimed ZSETs, per-admission-
group pending indexes (lexicographic ZSETs of each group's turns and of its items by
priority, the ZSET of each group's head sequence and the marker that the indexes were
built: `lua/lib/pending_index.lua`), queue
clock, per-tenant listing ZSETs, the ZSET of runs that ended before dispatch (which the
lifecycle sweeper retires) and the idempotency keys of its tenants' submits (creating a run
and claiming its key stay one script). Claims stay exactly once (per partition, in Lua);
which partition a pump claims from next is the shared queue's business.

The partition count is part of the layout: `{squeue}:partitions` records the count the
queue was first used with, and every process follows it (`adopt_recorded_partitions`, run
once by `RuntimeServices` as it connects to Redis, before anything uses the queue).
Must not run scripts.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from runtime_core.hot_state import HotState
from runtime_core.identity import SharedRunId, new_shared_run_id, shared_run_partition

SHARED_QUEUE_TAG = "squeue"
# Ids per HMGET / SCAN step when metrics read the whole queue or every run record.
READ_BATCH = 1_000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueuePartition:
    """The keys of one partition of the shared queue (all in one hash slot)."""

    hot_state: HotState
    index: int

    @property
    def tag(self) -> str:
        return SHARED_QUEUE_TAG if self.index == 0 else f"{SHARED_QUEUE_TAG}:{self.index}"

    def _key(self, *parts: str) -> str:
        return self.hot_state.tagged(self.tag, *parts)

    def run(self, shared_run_id: str) -> str:
        return self._key("run", shared_run_id)

    def idempotency(self, tenant_id: str, key: str) -> str:
        """The tenant's record of one idempotency key (hashed: any text is a safe key name)."""
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self._key("idem", tenant_id, digest)

    def tenant_runs(self, tenant_id: str) -> str:
        return self._key("tenant", tenant_id, "runs")

    @property
    def items(self) -> str:
        return self._key("items")

    @property
    def pending(self) -> str:
        return self._key("pending")

    @property
    def pending_by_group(self) -> str:
        return self._key("pending", "bygroup")

    @property
    def group_heads(self) -> str:
        return self._key("pending", "heads")

    @property
    def pending_by_priority(self) -> str:
        return self._key("pending", "bypriority")

    @property
    def pending_indexed(self) -> str:
        return self._key("pending", "indexed")

    @property
    def flow_rates(self) -> str:
        """The submit rate limits of the partition's tenants and their pipelines (lib/gcra)."""
        return self._key("flow", "rates")

    @property
    def flow_admitted(self) -> str:
        """Per-key concurrency (lua/lib/flow_keys.lua): runs holding a slot of their key."""
        return self._key("flow", "admitted")

    @property
    def flow_waiting(self) -> str:
        """Per-key concurrency: each key's line of Held runs."""
        return self._key("flow", "waiting")

    @property
    def flow_evicting(self) -> str:
        """Per-key concurrency: runs cancel-in-progress is cancelling, still holding their slot."""
        return self._key("flow", "evicting")

    @property
    def flow_slots(self) -> str:
        """Per-key concurrency: run -> the slot it holds."""
        return self._key("flow", "slots")

    @property
    def queue_keys(self) -> list[str]:
        """items, pending, seq and the pending indexes: what a script making items Pending takes."""
        return [
            self.items,
            self.pending,
            self.seq,
            self.pending_by_group,
            self.group_heads,
            self.pending_by_priority,
        ]

    @property
    def flow_keys(self) -> list[str]:
        """admitted, waiting, evicting, slots: the order the scripts take them in."""
        return [self.flow_admitted, self.flow_waiting, self.flow_evicting, self.flow_slots]

    @property
    def claimed(self) -> str:
        return self._key("claimed")

    @property
    def seq(self) -> str:
        return self._key("seq")

    @property
    def ended(self) -> str:
        """Shared runs that ended before dispatch (Rejected, Cancelled, Failed), by ended-at ms."""
        return self._key("ended")


@dataclass(frozen=True)
class SharedQueueKeys:
    hot_state: HotState

    @property
    def count(self) -> int:
        return self.hot_state.partition_count

    @property
    def partitions(self) -> list[QueuePartition]:
        return [self.partition(index) for index in range(self.count)]

    def partition(self, index: int) -> QueuePartition:
        return QueuePartition(self.hot_state, index)

    def of_run(self, shared_run_id: str) -> QueuePartition:
        return self.partition(shared_run_partition(shared_run_id, self.count))

    def of_tenant(self, tenant_id: str) -> QueuePartition:
        """The tenant's partition: a stable hash of its id (the same in every process)."""
        digest = hashlib.sha256(tenant_id.encode()).digest()
        return self.partition(int.from_bytes(digest[:8], "big") % self.count)

    def new_run_id(self, tenant_id: str) -> SharedRunId:
        """A new shared run id in the tenant's partition."""
        return new_shared_run_id(self.of_tenant(tenant_id).index)

    def run(self, shared_run_id: str) -> str:
        return self.of_run(shared_run_id).run(shared_run_id)

    @property
    def run_pattern(self) -> str:
        """A SCAN pattern matching the run records of every partition (`{squeue}` and `{squeue:k}`)."""
        return self.hot_state.prefix + "{" + SHARED_QUEUE_TAG + "*}:run:*"

    @property
    def layout(self) -> str:
        """The partition count the queue was first used with."""
        return self.partition(0)._key("partitions")


async def adopt_recorded_partitions(keys: SharedQueueKeys) -> int:
    """Follow the partition count recorded in Redis, recording this process's on first use.

    A queue written before counts were recorded (partition 0's sequence exists) is recorded
    as 1 partition: its run ids name no partition. A process configured for another count
    follows the recorded one (with a warning): the layout is the data's, not the process's.
    """
    hot_state, redis = keys.hot_state, keys.hot_state.redis
    configured = keys.count
    first_use = 1 if await redis.exists(keys.partition(0).seq) else configured
    await redis.set(keys.layout, str(first_use), nx=True)
    recorded = int(await redis.get(keys.layout) or first_use)
    if recorded != configured:
        log.warning(
            "shared_queue.partitions_recorded recorded=%s configured=%s",
            recorded,
            configured,
            extra={"recorded": recorded, "configured": configured},
        )
        hot_state.partitions = recorded
    return recorded
