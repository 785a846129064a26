"""The shared queue: Pending / Claimed / Dispatched items with exactly-once claims.

Owns the typed wrappers of `shared_enqueue`, `shared_mark_dispatched`, `shared_requeue`,
`shared_cancel`, `flow_release` and `shared_expire_claims` (the only place that knows their
KEYS/ARGV order; claims across the queue's partitions are `PartitionClaims`'s); its reads (an
item, the Pending counts) are `QueueReads`'. Must not decide admission or talk to providers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from runtime_core.flow import GcraCell, cells_json
from runtime_core.hot_state import HotState
from runtime_core.queueing._claims import PartitionClaims
from runtime_core.queueing._idempotency import IdempotencyKey
from runtime_core.queueing._models import (
    PumpIdentity,
    QueueClaim,
    SharedRunRecord,
    SharedRunStatus,
)
from runtime_core.queueing._queue_reads import QueueReads
from runtime_core.queueing._turns import PartitionTurns

DEFAULT_CLAIM_LEASE_MS = 30_000
# How many claims `shared_expire_claims` looks at per call.
_CLAIM_SCAN_LIMIT = 5_000


class QueueOutcome(Enum):
    APPLIED = 1
    REFUSED = 0
    MISSING = -1
    BUSY = -2
    DUPLICATE = 2  # the idempotency key already made run `detail` (same request)
    KEY_CONFLICT = 3  # the idempotency key made run `detail` for another request
    RATE_LIMITED = 4  # the rate limit `detail` refused the new run; it conforms in `wait_us`
    KEY_CANCELLED = 5  # cancel-newest: its concurrency key had no free slot, the run was cancelled


@dataclass(frozen=True)
class QueueTransition:
    """`placement`: where an enqueued run went (Pending, or Held in its concurrency key's line);
    `picked`: runs cancel-in-progress picked for the caller to cancel."""

    outcome: QueueOutcome
    now_ms: int
    detail: str | None = None
    wait_us: int | None = None
    placement: str | None = None
    picked: tuple[str, ...] = ()

    @property
    def applied(self) -> bool:
        return self.outcome is QueueOutcome.APPLIED


def _transition(reply: list[object]) -> QueueTransition:
    outcome, now_ms = QueueOutcome(int(str(reply[0]))), int(str(reply[1]))
    if outcome is QueueOutcome.RATE_LIMITED:
        return QueueTransition(outcome, now_ms, str(reply[3]), int(str(reply[2])))
    detail = str(reply[2]) if len(reply) > 2 else None
    if outcome is QueueOutcome.APPLIED and len(reply) > 3:
        return QueueTransition(
            outcome, now_ms, detail, placement=str(reply[3]), picked=tuple(map(str, reply[4:]))
        )
    return QueueTransition(outcome, now_ms, detail)


class SharedQueue(QueueReads):
    def __init__(self, hot_state: HotState, *, claim_lease_ms: int = DEFAULT_CLAIM_LEASE_MS) -> None:
        super().__init__(hot_state)
        self.claim_lease_ms = claim_lease_ms
        self._scripts = hot_state.scripts
        self._claims = PartitionClaims(hot_state, self.keys, claim_lease_ms)

    async def enqueue_new(
        self,
        record: SharedRunRecord,
        idempotency: IdempotencyKey | None = None,
        rate_cells: Sequence[GcraCell] = (),
    ) -> QueueTransition:
        """QueueFirst: create the run and its Pending item in one step (run QueuedGlobally);
        with `idempotency`, only if its key made no run yet (DUPLICATE / KEY_CONFLICT); with
        `rate_cells`, only if each of those rate limits takes the run (else RATE_LIMITED)."""
        return await self._enqueue(record, json.dumps(record.creation_fields()), (), idempotency, rate_cells)

    async def enqueue_existing(
        self, record: SharedRunRecord, allowed_from: tuple[SharedRunStatus, ...]
    ) -> QueueTransition:
        """Queue an existing run (DirectDispatch QueueGlobally, fulfilled scale-out requeue)."""
        return await self._enqueue(record, "", allowed_from)

    async def _enqueue(
        self,
        record: SharedRunRecord,
        fields_json: str,
        allowed_from: tuple[SharedRunStatus, ...],
        idempotency: IdempotencyKey | None = None,
        rate_cells: Sequence[GcraCell] = (),
    ) -> QueueTransition:
        k = self.keys.of_run(record.shared_run_id)
        keys = [
            k.run(record.shared_run_id),
            k.items,
            k.pending,
            k.seq,
            k.tenant_runs(record.tenant_id),
            k.pending_by_group,
            k.group_heads,
            k.pending_by_priority,
            k.flow_rates,
            *k.flow_keys,
            k.ended,
        ]
        args = [
            record.shared_run_id,
            fields_json,
            ",".join(s.value for s in allowed_from),
            cells_json(rate_cells),
        ]
        if idempotency is not None:
            keys.append(k.idempotency(record.tenant_id, idempotency.key))
            args += [idempotency.fingerprint, str(idempotency.window_ms)]
        return _transition(await self._scripts["shared_enqueue"](keys=keys, args=args))

    async def claim_next(
        self,
        pump: PumpIdentity,
        skip_groups: frozenset[str] = frozenset(),
        turns: PartitionTurns | None = None,
    ) -> QueueClaim | None:
        """The oldest Pending item outside `skip_groups`, or None (see `claim_batch`)."""
        claims = await self.claim_batch(pump, skip_groups, turns)
        return claims[0] if claims else None

    async def claim_batch(
        self,
        pump: PumpIdentity,
        skip_groups: frozenset[str] = frozenset(),
        turns: PartitionTurns | None = None,
        *,
        limit: int = 1,
    ) -> list[QueueClaim]:
        """Up to `limit` of the oldest Pending items outside `skip_groups`, in queue order,
        from every partition holding some, in one round of calls (`turns`: the cycle's view of
        the partitions' queues, read again when stale; see `PartitionClaims`)."""
        return await self._claims.claim(pump, skip_groups, turns, limit)

    async def expire_claims_of_earlier_lives(self, claimer_prefix: str, incarnation: str) -> int:
        """Expire the claims `claimer_prefix` holds under another incarnation (a previous life)."""
        expired = 0
        for k in self.keys.partitions:
            reply = await self._scripts["shared_expire_claims"](
                keys=[k.items, k.claimed], args=[claimer_prefix, f"@{incarnation}", _CLAIM_SCAN_LIMIT]
            )
            expired += int(reply[0])
        return expired

    async def mark_dispatched(
        self, shared_run_id: str, token: str, fields: dict[str, str]
    ) -> QueueTransition:
        """After provider success only; token "" marks a DirectDispatch run (no queue item)."""
        k = self.keys.of_run(shared_run_id)
        # Coalesced: a pump cycle marks the runs it dispatches together in one round trip.
        reply = await self.hot_state.coalesced("shared_mark_dispatched")(
            keys=[k.items, k.claimed, k.run(shared_run_id)], args=[shared_run_id, token, json.dumps(fields)]
        )
        return _transition(reply)

    async def requeue(self, claim: QueueClaim, reason: str) -> QueueTransition:
        """Back to Pending at the tail (delivery failed); the run stays QueuedGlobally."""
        return await self._requeue(claim, "Pending", reason)

    async def requeue_in_place(self, claim: QueueClaim, reason: str) -> QueueTransition:
        """Back to Pending at its own place (no capacity yet): its tenant's runs keep their order."""
        return await self._requeue(claim, "Waiting", reason)

    async def abandon(self, claim: QueueClaim, reason: str) -> QueueTransition:
        """The item cannot ever dispatch (run or snapshot missing): item and run Failed."""
        return await self._requeue(claim, "Failed", reason)

    async def _requeue(self, claim: QueueClaim, target: str, reason: str) -> QueueTransition:
        k = self.keys.of_run(claim.shared_run_id)
        reply = await self._scripts["shared_requeue"](
            keys=[
                k.items,
                k.pending,
                k.claimed,
                k.seq,
                k.run(claim.shared_run_id),
                k.ended,
                k.pending_by_group,
                k.group_heads,
                k.pending_by_priority,
                *k.flow_keys,
            ],
            args=[claim.shared_run_id, claim.token, target, reason],
        )
        return _transition(reply)

    async def cancel(self, shared_run_id: str, *, reason: str, requested_by: str) -> QueueTransition:
        k = self.keys.of_run(shared_run_id)
        reply = await self._scripts["shared_cancel"](
            keys=[
                k.run(shared_run_id),
                k.items,
                k.pending,
                k.ended,
                k.pending_by_group,
                k.pending_by_priority,
                k.group_heads,
                k.seq,
                *k.flow_keys,
            ],
            args=[shared_run_id, reason, requested_by],
        )
        return _transition(reply)

    async def release_key(self, shared_run_id: str, local_run_id: str) -> bool:
        """A run holding a concurrency key's slot ended after dispatch as `local_run_id`: the
        slot goes back and the key's waiting runs take it (idempotent; False: it held none, or
        the run goes on as another local run). Coalesced: runs of a process that end together
        release in one round trip."""
        k = self.keys.of_run(shared_run_id)
        reply = await self.hot_state.coalesced("flow_release")(
            keys=[*k.queue_keys, *k.flow_keys, k.run(shared_run_id)],
            args=[shared_run_id, local_run_id],
        )
        return int(reply[0]) == 1
