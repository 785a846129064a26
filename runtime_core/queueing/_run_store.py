"""The shared run store: shared run records in Redis, created and moved only by Lua.

Owns reading records, creating a Submitted record and compare-and-set status transitions
through `shared_run_transition` (the only place that knows its KEYS/ARGV; a creation may
claim an idempotency key in the same call), and the per-tenant listing. Queue transitions
live in the shared queue. Must not dispatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from runtime_core.hot_state import HotState
from runtime_core.queueing._idempotency import IdempotencyKey
from runtime_core.queueing._keys import SharedQueueKeys
from runtime_core.queueing._models import SharedRunRecord, SharedRunStatus


class TransitionOutcome(Enum):
    APPLIED = 1
    REFUSED = 0
    MISSING = -1
    DUPLICATE = 2  # the idempotency key already made run `current_status` (same request)
    KEY_CONFLICT = 3  # the idempotency key made run `current_status` for another request


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

    async def create(
        self, record: SharedRunRecord, idempotency: IdempotencyKey | None = None
    ) -> RunTransition:
        """Create the record with `record.status` (REFUSED when the id already exists); with
        `idempotency`, only if its key made no run yet (DUPLICATE / KEY_CONFLICT)."""
        return await self._transition(
            record.shared_run_id, record.tenant_id, "", record.status, record.creation_fields(), idempotency
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
        idempotency: IdempotencyKey | None = None,
    ) -> RunTransition:
        keys = [self.keys.run(shared_run_id), self.keys.tenant_runs(tenant_id)]
        args = [shared_run_id, expected_csv, new_status.value, json.dumps(fields)]
        if idempotency is not None:
            keys.append(self.keys.idempotency(tenant_id, idempotency.key))
            args += [idempotency.fingerprint, str(idempotency.window_ms)]
        reply = await self.hot_state.scripts["shared_run_transition"](keys=keys, args=args)
        detail = str(reply[2]) if len(reply) > 2 else None
        return RunTransition(TransitionOutcome(int(reply[0])), int(reply[1]), detail)

    async def list_tenant(self, tenant_id: str, *, limit: int = 100) -> list[SharedRunRecord]:
        ids = await self.hot_state.redis.zrevrange(self.keys.tenant_runs(tenant_id), 0, limit - 1)
        records = [await self.get(shared_run_id) for shared_run_id in ids]
        return [record for record in records if record is not None]
