"""The shared run store: shared run records in Redis, created and moved only by Lua.

Owns reading records, creating a Submitted record and compare-and-set status transitions
through `shared_run_transition` (a creation may claim an idempotency key in the same call),
retiring a finished run through `retire_shared_run` (the only places that know those
scripts' KEYS/ARGV), the per-tenant listing of the runs still in hot state, newest first,
and the run counts by tenant and status the metrics gauge reports. Queue transitions live in
the shared queue. Must not dispatch.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from runtime_core.flow import GcraCell, cells_json
from runtime_core.hot_state import HotState
from runtime_core.queueing._idempotency import IdempotencyKey
from runtime_core.queueing._keys import READ_BATCH, SharedQueueKeys
from runtime_core.queueing._models import SharedRunRecord, SharedRunStatus, SharedRunSummary

ListingPosition = tuple[int, str]
"""(created_at_ms, shared_run_id) of the last run a newest-first listing returned."""


class TransitionOutcome(Enum):
    APPLIED = 1
    REFUSED = 0
    MISSING = -1
    DUPLICATE = 2  # the idempotency key already made run `current_status` (same request)
    KEY_CONFLICT = 3  # the idempotency key made run `current_status` for another request
    RATE_LIMITED = 4  # the rate limit `current_status` refused the new run; it conforms in `wait_us`


class RetireOutcome(Enum):
    RETIRED = 1
    ALREADY_RETIRED = 2
    NOT_FINISHED = 0
    MISSING = -1


@dataclass(frozen=True)
class RunTransition:
    outcome: TransitionOutcome
    now_ms: int
    current_status: str | None = None
    wait_us: int | None = None


class SharedRunStore:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self.keys = SharedQueueKeys(hot_state)

    async def get(self, shared_run_id: str) -> SharedRunRecord | None:
        raw = await self.hot_state.redis.hgetall(self.keys.run(shared_run_id))
        return SharedRunRecord.from_hash(raw) if raw else None

    async def get_many(self, shared_run_ids: list[str]) -> list[SharedRunRecord | None]:
        """The records of `shared_run_ids`, in order, in one pipelined read (None: gone),
        sharing its round trip with concurrent calls (coalesced)."""
        keys = [self.keys.run(shared_run_id) for shared_run_id in shared_run_ids]

        def queue(pipe: Any) -> None:
            for key in keys:
                pipe.hgetall(key)

        return [
            SharedRunRecord.from_hash(raw) if raw else None
            for raw in await self.hot_state.coalescer.commands(queue)
        ]

    async def existing(self, shared_run_ids: list[str]) -> set[str]:
        """Which of `shared_run_ids` have a record, in one pipelined read."""
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for shared_run_id in shared_run_ids:
            pipe.exists(self.keys.run(shared_run_id))
        return {i for i, found in zip(shared_run_ids, await pipe.execute(), strict=True) if found}

    async def create(
        self,
        record: SharedRunRecord,
        idempotency: IdempotencyKey | None = None,
        rate_cells: Sequence[GcraCell] = (),
    ) -> RunTransition:
        """Create the record with `record.status` (REFUSED when the id already exists); with
        `idempotency`, only if its key made no run yet (DUPLICATE / KEY_CONFLICT); with
        `rate_cells`, only if each of those rate limits takes the run (else RATE_LIMITED)."""
        return await self._transition(
            record.shared_run_id,
            record.tenant_id,
            "",
            record.status,
            record.creation_fields(),
            idempotency,
            rate_cells,
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
        rate_cells: Sequence[GcraCell] = (),
    ) -> RunTransition:
        k = self.keys.of_run(shared_run_id)
        keys = [k.run(shared_run_id), k.tenant_runs(tenant_id), k.ended, k.flow_rates]
        args = [shared_run_id, expected_csv, new_status.value, json.dumps(fields), cells_json(rate_cells)]
        if idempotency is not None:
            keys.append(k.idempotency(tenant_id, idempotency.key))
            args += [idempotency.fingerprint, str(idempotency.window_ms)]
        reply = await self.hot_state.scripts["shared_run_transition"](keys=keys, args=args)
        outcome, now_ms = TransitionOutcome(int(reply[0])), int(reply[1])
        if outcome is TransitionOutcome.RATE_LIMITED:
            return RunTransition(outcome, now_ms, str(reply[3]), int(reply[2]))
        return RunTransition(outcome, now_ms, str(reply[2]) if len(reply) > 2 else None)

    async def count_by_status(self) -> dict[tuple[str, str], int]:
        """(tenant id, status) -> shared run records held in Redis (the runs-by-status gauge).

        SCANs the run records in batches (never a blocking KEYS), one pipelined HMGET per batch;
        the cost grows with the runs Redis holds, so the metrics exposition caches the result.
        """
        counts: Counter[tuple[str, str]] = Counter()
        pattern = self.keys.run_pattern
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

    async def retire(
        self, shared_run_id: str, tenant_id: str, ended_by_local_run_id: str | None, retention_ms: int
    ) -> RetireOutcome:
        """Take a finished run out of the live structures; its record expires after `retention_ms`.

        `ended_by_local_run_id`: the local run whose end finished it (None: it ended before any
        dispatch). Refused (NOT_FINISHED) while the run waits for a dispatch or names another
        local run.
        """
        k = self.keys.of_run(shared_run_id)
        reply = await self.hot_state.scripts["retire_shared_run"](
            keys=[
                k.run(shared_run_id),
                k.items,
                k.pending,
                k.claimed,
                k.tenant_runs(tenant_id),
                k.ended,
            ],
            args=[shared_run_id, ended_by_local_run_id or "", retention_ms],
        )
        return RetireOutcome(int(reply[0]))

    async def list_tenant(self, tenant_id: str, *, limit: int = 100) -> list[SharedRunRecord]:
        ids = await self.hot_state.redis.zrevrange(
            self.keys.of_tenant(tenant_id).tenant_runs(tenant_id), 0, limit - 1
        )
        records = [await self.get(shared_run_id) for shared_run_id in ids]
        return [record for record in records if record is not None]

    async def tenant_summaries(
        self,
        tenant_id: str,
        *,
        after: ListingPosition | None = None,
        batch_size: int = 200,
        newest_first: bool = True,
    ) -> AsyncIterator[list[SharedRunSummary]]:
        """The tenant's runs in hot state, newest first (ties: larger id first), in batches; with
        `newest_first` False, oldest first (ties: smaller id first).

        `after`: continue strictly after that position in that order. Each batch continues after
        the last run of the previous one, so runs retired meanwhile shift nothing. Runs whose hot
        record is gone are skipped.
        """
        position = after
        while True:
            ids, position = await self._next_ids(tenant_id, position, batch_size, newest_first)
            if not ids:
                return
            yield await self._summaries(ids)

    async def _next_ids(
        self, tenant_id: str, after: ListingPosition | None, count: int, newest_first: bool
    ) -> tuple[list[str], ListingPosition | None]:
        key, redis = self.keys.of_tenant(tenant_id).tenant_runs(tenant_id), self.hot_state.redis
        entries: list[tuple[str, float]] = []
        edge: str = "+inf" if newest_first else "-inf"
        if after is not None:
            at_ms, last_id = after
            same_ms = await redis.zrangebyscore(key, at_ms, at_ms, withscores=True)
            beyond = (e for e in same_ms if (e[0] < last_id if newest_first else e[0] > last_id))
            entries = sorted(beyond, reverse=newest_first)[:count]
            edge = f"({at_ms}"
        rest = count - len(entries)
        if rest > 0 and newest_first:
            entries += await redis.zrevrangebyscore(key, edge, "-inf", start=0, num=rest, withscores=True)
        elif rest > 0:
            entries += await redis.zrangebyscore(key, edge, "+inf", start=0, num=rest, withscores=True)
        if not entries:
            return [], after
        last_id, last_ms = entries[-1]
        return [member for member, _ in entries], (int(last_ms), last_id)

    async def _summaries(self, shared_run_ids: list[str]) -> list[SharedRunSummary]:
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for shared_run_id in shared_run_ids:
            pipe.hmget(self.keys.run(shared_run_id), list(SharedRunSummary.FIELDS))
        summaries = []
        for shared_run_id, values in zip(shared_run_ids, await pipe.execute(), strict=True):
            summary = await self._summary(shared_run_id, values)
            if summary is not None:
                summaries.append(summary)
        return summaries

    async def _summary(self, shared_run_id: str, values: list[str | None]) -> SharedRunSummary | None:
        named = dict(zip(SharedRunSummary.FIELDS, values, strict=True))
        if named["status"] is None:
            return None  # expired or retired between the listing and this read
        if named["pipeline_name"] is not None:
            return SharedRunSummary.from_values(values)
        # A record written before the listing copies existed: read it whole once.
        record = await self.get(shared_run_id)
        if record is None:
            return None
        return SharedRunSummary(
            shared_run_id=record.shared_run_id,
            tenant_id=record.tenant_id,
            status=record.status,
            submit_mode=record.submit_mode,
            pipeline_name=record.pipeline.name,
            submitted_by=record.submitted_by,
            created_at_ms=record.created_at_ms,
            failure_reason=record.failure_reason,
            local_run_id=record.local_run_id,
        )
