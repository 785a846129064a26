"""The scale-out request store: requested capacity persisted in Redis with tenant settings.

Owns scale-out request records (Pending, Observed, Fulfilled, Rejected) with the tenant's
runtime settings and snapshot copied in at request time, the pending index, the
exactly-once observation (ZREM on the pending ZSET decides who handles a request) and
forgetting the request of a finished run. Keys live under the hash tag `{scaleout}`. Must
not create capacity or requeue runs.
"""

from __future__ import annotations

import secrets
from enum import StrEnum

from pydantic import BaseModel

from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import TenantRuntimeSettings

SCALE_OUT_TAG = "scaleout"


class ScaleOutStatus(StrEnum):
    PENDING = "Pending"
    OBSERVED = "Observed"
    FULFILLED = "Fulfilled"
    REJECTED = "Rejected"


class ScaleOutRequestRecord(BaseModel):
    request_id: str
    shared_run_id: str
    tenant_id: str
    tenant_group_id: str | None
    tenant_settings: TenantRuntimeSettings
    snapshot: ExecutionContextSnapshot
    provider_hint: str | None = None
    status: ScaleOutStatus = ScaleOutStatus.PENDING
    created_at_ms: int
    updated_at_ms: int
    observed_by: str | None = None
    fulfilled_runtime_instance_id: str | None = None
    reason: str | None = None


def new_scale_out_request_id() -> str:
    return "sor_" + secrets.token_hex(8)


class ScaleOutRequestStore:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self._records = hot_state.tagged(SCALE_OUT_TAG, "requests")
        self._pending = hot_state.tagged(SCALE_OUT_TAG, "pending")

    async def create(
        self,
        request_id: str,
        shared_run_id: str,
        tenant_settings: TenantRuntimeSettings,
        snapshot: ExecutionContextSnapshot,
        provider_hint: str | None = None,
    ) -> ScaleOutRequestRecord:
        now = await self.hot_state.server_time_ms()
        record = ScaleOutRequestRecord(
            request_id=request_id,
            shared_run_id=shared_run_id,
            tenant_id=snapshot.tenant_id,
            tenant_group_id=snapshot.tenant_group_id,
            tenant_settings=tenant_settings,
            snapshot=snapshot,
            provider_hint=provider_hint,
            created_at_ms=now,
            updated_at_ms=now,
        )
        pipe = self.hot_state.redis.pipeline(transaction=True)
        pipe.hset(self._records, request_id, record.model_dump_json())
        pipe.zadd(self._pending, {request_id: now})
        await pipe.execute()
        return record

    async def get(self, request_id: str) -> ScaleOutRequestRecord | None:
        raw = await self.hot_state.redis.hget(self._records, request_id)
        return ScaleOutRequestRecord.model_validate_json(raw) if raw else None

    async def pending_ids(self, *, limit: int = 100) -> list[str]:
        return list(await self.hot_state.redis.zrange(self._pending, 0, limit - 1))

    async def observe(self, request_id: str, observer: str) -> ScaleOutRequestRecord | None:
        """Take a Pending request for handling; None when another watcher already took it."""
        if int(await self.hot_state.redis.zrem(self._pending, request_id)) != 1:
            return None
        record = await self.get(request_id)
        if record is None:
            return None
        return await self._save(record, status=ScaleOutStatus.OBSERVED, observed_by=observer)

    async def fulfill(
        self, record: ScaleOutRequestRecord, runtime_instance_id: str, reason: str
    ) -> ScaleOutRequestRecord:
        return await self._save(
            record,
            status=ScaleOutStatus.FULFILLED,
            fulfilled_runtime_instance_id=runtime_instance_id,
            reason=reason,
        )

    async def reject(self, record: ScaleOutRequestRecord, reason: str) -> ScaleOutRequestRecord:
        return await self._save(record, status=ScaleOutStatus.REJECTED, reason=reason)

    async def forget(self, request_id: str) -> None:
        """Drop the request of a run that finished (archived): it can never be acted on again."""
        pipe = self.hot_state.redis.pipeline(transaction=True)
        pipe.zrem(self._pending, request_id)
        pipe.hdel(self._records, request_id)
        await pipe.execute()

    async def _save(self, record: ScaleOutRequestRecord, **changes: object) -> ScaleOutRequestRecord:
        changes["updated_at_ms"] = await self.hot_state.server_time_ms()
        updated = record.model_copy(update=changes)
        await self.hot_state.redis.hset(self._records, record.request_id, updated.model_dump_json())
        return updated
