"""The shared run store: shared run records in Redis, created and moved only by Lua.

Owns reading records, creating a Submitted record and compare-and-set status transitions
through `shared_run_transition` (the only place that knows its KEYS/ARGV), and the
per-tenant listing and the run counts by tenant and status the metrics gauge reports. Queue
transitions live in the shared queue. Must not dispatch.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from enum import Enum

from runtime_core.hot_state import HotState
from runtime_core.queueing._keys import READ_BATCH, SharedQueueKeys
from runtime_core.queueing._models import SharedRunRecord, SharedRunStatus


class TransitionOutcome(Enum):
    APPLIED = 1
    REFUSED = 0
    MISSING = -1


@dataclass(frozen=True)
class RunTransition:
    outcome: TransitionOutcome
    now_ms: int
    current_status: str | None = None


class SharedRunStore:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self.keys = SharedQueueKeys(hot_state)

    async def get(self, shared_run_id: str) -> SharedRunRecord | None:
        raw = await self.hot_state.redis.hgetall(self.keys.run(shared_run_id))
        return SharedRunRecord.from_hash(raw) if raw else None

    async def create(self, record: SharedRunRecord) -> RunTransition:
        """Create the record with `record.status` (REFUSED when the id already exists)."""
        return await self._transition(
            record.shared_run_id, record.tenant_id, "", record.status, record.creation_fields()
        )

    async def transition(
        self,
        record: SharedRunRecord,
        expected: tuple[SharedRunStatus, ...],
        new_status: SharedRunStatus,
        fields: dict[str, str] | None = None,
    ) -> RunTransition:
        expected_csv = ",".join(status.value for status in expected)
        return await self._transition(
            record.shared_run_id, record.tenant_id, expected_csv, new_status, fields or {}
        )

    async def _transition(
        self,
        shared_run_id: str,
        tenant_id: str,
        expected_csv: str,
        new_status: SharedRunStatus,
        fields: dict[str, str],
    ) -> RunTransition:
        reply = await self.hot_state.scripts["shared_run_transition"](
            keys=[self.keys.run(shared_run_id), self.keys.tenant_runs(tenant_id)],
            args=[shared_run_id, expected_csv, new_status.value, json.dumps(fields)],
        )
        detail = str(reply[2]) if len(reply) > 2 else None
        return RunTransition(TransitionOutcome(int(reply[0])), int(reply[1]), detail)

    async def count_by_status(self) -> dict[tuple[str, str], int]:
        """(tenant id, status) -> shared run records held in Redis (the runs-by-status gauge).

        SCANs the run records in batches (never a blocking KEYS), one pipelined HMGET per batch;
        the cost grows with the runs Redis holds, so the metrics exposition caches the result.
        """
        counts: Counter[tuple[str, str]] = Counter()
        pattern = self.keys.run("*")
        batch: list[str] = []
        async for key in self.hot_state.redis.scan_iter(match=pattern, count=READ_BATCH, _type="HASH"):
            batch.append(key)
            if len(batch) >= READ_BATCH:
                counts.update(await self._tenant_statuses(batch))
                batch = []
        counts.update(await self._tenant_statuses(batch))
        return dict(counts)

    async def _tenant_statuses(self, keys: list[str]) -> list[tuple[str, str]]:
        if not keys:
            return []
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(key, "tenant_id", "status")
        return [(tenant or "", status) for tenant, status in await pipe.execute() if status]

    async def list_tenant(self, tenant_id: str, *, limit: int = 100) -> list[SharedRunRecord]:
        ids = await self.hot_state.redis.zrevrange(self.keys.tenant_runs(tenant_id), 0, limit - 1)
        records = [await self.get(shared_run_id) for shared_run_id in ids]
        return [record for record in records if record is not None]
