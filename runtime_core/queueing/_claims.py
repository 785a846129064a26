"""Claims of the shared queue's oldest Pending runs, across its partitions, in one round trip.

Owns the typed wrapper of `shared_claim_next` (the only place that knows its KEYS/ARGV order
and its reply) and a claim of several runs across partitions: the cycle's view of the
partitions' queues (`PartitionTurns`, read again when stale: one pipelined read) plans how
many runs each partition gives, every planned partition is claimed at once (concurrent calls,
so one round trip for the whole batch however the tenants' runs interleave across
partitions), each bounded by the oldest run left to the others, and the claims come back in
queue order. A partition whose real head is newer than the view said (another pump claimed
there) claims nothing and the view learns its head; the plan is made again then. Must not
decide admission, dispatch, or change an item but through the script.
"""

from __future__ import annotations

import asyncio
import json
import secrets

from runtime_core.flow import retry_after_ms
from runtime_core.hot_state import HotState
from runtime_core.queueing._keys import QueuePartition, SharedQueueKeys
from runtime_core.queueing._models import PumpIdentity, QueueClaim
from runtime_core.queueing._turns import VIEW_DEPTH, ClaimTurn, PartitionTurns

_EXPIRED_CLAIMS_PER_CALL = 16


class PartitionClaims:
    def __init__(self, hot_state: HotState, keys: SharedQueueKeys, claim_lease_ms: int) -> None:
        self.hot_state = hot_state
        self.keys = keys
        self.claim_lease_ms = claim_lease_ms

    async def claim(
        self, pump: PumpIdentity, skip_groups: frozenset[str], turns: PartitionTurns | None, limit: int
    ) -> list[QueueClaim]:
        """Up to `limit` of the oldest Pending items outside `skip_groups`, in queue order, from
        every partition holding some (see the module docstring); [] when none is claimable."""
        partitions = self.keys.partitions
        turns = turns or PartitionTurns()
        if len(partitions) == 1:
            claims = await self._claim_in(partitions[0], pump, skip_groups, ClaimTurn(0, limit, None), turns)
            turns.read({0: turns.queues.get(0, [])}, {0})  # the claim's answer is the whole view
            return claims
        if turns.stale:
            await self._read(turns)
        for round_ in range(len(partitions) + 1):
            # Bounded by what the plan leaves to the others, unless views kept going stale under
            # other pumps' claims as often as there are partitions (then progress comes first).
            plan = turns.plan(limit, bounded=round_ < len(partitions))
            if not plan:
                return []
            calls = [self._claim_in(partitions[t.partition], pump, skip_groups, t, turns) for t in plan]
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
            claims = sorted(
                (claim for outcome in outcomes if isinstance(outcome, list) for claim in outcome),
                key=lambda claim: claim.sequence,
            )
            errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
            if errors and not claims:
                raise errors[0]
            if claims:  # a partition that failed is claimed from again by the next call
                return claims
        return []

    async def _read(self, turns: PartitionTurns) -> None:
        """Every partition's oldest Pending sequences and claims in flight, in one pipelined read."""
        partitions = self.keys.partitions
        pipe = self.hot_state.redis.pipeline(transaction=False)
        for partition in partitions:
            pipe.zrange(partition.pending, 0, VIEW_DEPTH - 1, withscores=True)
            pipe.zcard(partition.claimed)
        replies = await pipe.execute()
        pending = {p.index: [int(score) for _, score in replies[2 * p.index]] for p in partitions}
        turns.read(pending, {p.index for p in partitions if replies[2 * p.index + 1]})

    async def _claim_in(
        self,
        k: QueuePartition,
        pump: PumpIdentity,
        skip_groups: frozenset[str],
        turn: ClaimTurn,
        turns: PartitionTurns,
    ) -> list[QueueClaim]:
        """The claims made in partition `k`; `turns` learns the partition's next sequences (its
        oldest claimable item's alone when that is newer than `turn.below`), or that nothing is
        claimable there (and, when a tenant's dispatch rate limit passed its runs over, when it
        conforms again)."""
        token = secrets.token_hex(12)
        reply = await self.hot_state.coalesced("shared_claim_next")(
            keys=[
                k.items,
                k.pending,
                k.claimed,
                k.pending_by_group,
                k.group_heads,
                k.pending_indexed,
                k.pending_by_priority,
                k.flow_rates,
            ],
            args=[
                token,
                pump.claimer,
                self.claim_lease_ms,
                _EXPIRED_CLAIMS_PER_CALL,
                json.dumps(sorted(skip_groups)),
                turn.limit,
                "" if turn.below is None else str(turn.below),
                VIEW_DEPTH,
            ],
        )
        if int(reply[0]) == 2:  # its oldest claimable item is newer than `below`
            turns.observe(k.index, [int(reply[2])], complete=False)
            return []
        if int(reply[0]) != 1:
            if len(reply) > 3 and reply[3] != "":
                turns.rate_limited(retry_after_ms(int(reply[3])))
            turns.exhausted(k.index)
            return []
        following = _sequences(reply[2])
        turns.observe(k.index, following, complete=len(following) < VIEW_DEPTH)
        claimed_at_ms = int(reply[1])
        return [
            QueueClaim(
                shared_run_id=str(reply[at]),
                token=f"{token}{n}",
                attempts=int(reply[at + 1]),
                claimed_at_ms=claimed_at_ms,
                pump=pump,
                unsettled=_attempt_ids(reply[at + 2]),
                sequence=int(reply[at + 3]),
            )
            for n, at in enumerate(range(3, len(reply), 4), start=1)
        ]


def _sequences(raw: str) -> list[int]:
    """A JSON array of integer-text sequences (cjson encodes an empty one as "{}")."""
    listed = json.loads(raw)
    return [int(seq) for seq in listed] if isinstance(listed, list) else []


def _attempt_ids(raw: str) -> list[str]:
    """The unsettled attempt ids of a claim (cjson encodes an empty list as "{}")."""
    unsettled = json.loads(raw)
    return [str(attempt) for attempt in unsettled] if isinstance(unsettled, list) else []
