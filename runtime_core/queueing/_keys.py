"""Redis key layout of the shared run store and shared queue.

Every key lives under ONE hash tag, `{squeue}`: the run records, the item table, the
pending and claimed ZSETs, the per-admission-group pending index (a lexicographic ZSET
of "<group>\x1f<sequence>\x1f<run>" members, the ZSET of each group's head sequence and
the marker that the index was built), the sequence counter, the per-tenant listing ZSETs, the ZSET of
runs that ended before dispatch (which the lifecycle sweeper retires) and the idempotency
keys of submits (in the run records' slot, so creating a run and claiming its key are one
script: two submits with one key can never both create a run). So every shared-queue
script (`shared_enqueue`, `shared_claim_next`, `shared_mark_dispatched`, `shared_requeue`,
`shared_cancel`, `shared_run_transition`, `retire_shared_run`) touches a single Cluster slot;
the price is that the whole shared queue lives on one shard, which is the point of a
global queue with exactly-once claims.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from runtime_core.hot_state import HotState

SHARED_QUEUE_TAG = "squeue"
# Ids per HMGET / SCAN step when metrics read the whole queue or every run record.
READ_BATCH = 1_000


@dataclass(frozen=True)
class SharedQueueKeys:
    hot_state: HotState

    def run(self, shared_run_id: str) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "run", shared_run_id)

    def idempotency(self, tenant_id: str, key: str) -> str:
        """The tenant's record of one idempotency key (hashed: any text is a safe key name)."""
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "idem", tenant_id, digest)

    def tenant_runs(self, tenant_id: str) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "tenant", tenant_id, "runs")

    @property
    def items(self) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "items")

    @property
    def pending(self) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "pending")

    @property
    def pending_by_group(self) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "pending", "bygroup")

    @property
    def group_heads(self) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "pending", "heads")

    @property
    def pending_indexed(self) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "pending", "indexed")

    @property
    def claimed(self) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "claimed")

    @property
    def seq(self) -> str:
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "seq")

    @property
    def ended(self) -> str:
        """Shared runs that ended before dispatch (Rejected, Cancelled, Failed), by ended-at ms."""
        return self.hot_state.tagged(SHARED_QUEUE_TAG, "ended")
