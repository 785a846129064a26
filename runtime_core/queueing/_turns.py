"""Which shared-queue partitions a pump claims from, and how many runs each: the fairness rule
across partitions.

Owns `PartitionTurns`, one pump cycle's view of the partitions' queues (the queue sequences
of each partition's oldest Pending items, up to `VIEW_DEPTH` of them: a clock in
microseconds comparable across partitions) and the claims it plans from that view: the
`limit` oldest known runs of all partitions together, each partition's share claimed in one
call bounded by the oldest run the plan leaves to the other partitions (`ClaimTurn.below`),
so one round of claims takes runs of several partitions at once, in queue order, and never a
run younger than one it leaves Pending elsewhere (tenants hashed to different partitions
wait alike, however many runs each partition holds). A partition known only up to the view's
depth limits the plan to its last known run (its next ones are unknown); a partition with
claims in flight but nothing Pending is still visited once nothing else is (an expired claim
goes back to Pending inside the claim); one with neither is left out. The view moves as this
cycle claims (a claim returns its partition's next sequences) and as claims find their
partition's head newer than the view said (another pump claimed there: the claim takes
nothing and returns the real head); other writers' enqueues are seen when the view is read
again (`REFRESH_S`). Must not run scripts or read Redis.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

REFRESH_S = 0.25
"""How old a cycle's view of the partitions' queues may grow before it is read again."""
VIEW_DEPTH = 16
"""How many of a partition's oldest Pending sequences a view knows (as many as a claim takes)."""


@dataclass(frozen=True)
class ClaimTurn:
    """Claim up to `limit` runs of `partition`, only while older than `below` (the first may
    tie with it; None: no bound)."""

    partition: int
    limit: int
    below: int | None


@dataclass
class PartitionTurns:
    queues: dict[int, list[int]] = field(default_factory=dict)
    """Partition -> the sequences of its oldest Pending items known, ascending ([]: none
    Pending, claims in flight)."""
    complete: set[int] = field(default_factory=set)
    """The partitions whose every Pending item is in `queues`."""
    read_at: float = -math.inf
    rate_wait_ms: int | None = None
    """The soonest a group a tenant's dispatch rate limit passed over may be claimed (None: none)."""

    @property
    def stale(self) -> bool:
        return time.monotonic() - self.read_at > REFRESH_S

    def read(self, pending: dict[int, list[int]], in_flight: set[int], depth: int = VIEW_DEPTH) -> None:
        """A fresh view: each partition's oldest Pending sequences (at most `depth` read), and the
        partitions with claims in flight."""
        self.queues = {p: sorted(seqs) for p, seqs in pending.items() if seqs or p in in_flight}
        self.complete = {p for p, seqs in self.queues.items() if len(seqs) < depth}
        self.read_at = time.monotonic()

    def reset(self, pending_heads: dict[int, float | None], in_flight: set[int]) -> None:
        """A fresh view of each partition's head only (None: nothing Pending)."""
        self.read({p: [] if h is None else [int(h)] for p, h in pending_heads.items()}, in_flight, depth=1)

    def observe(self, partition: int, sequences: list[int], *, complete: bool) -> None:
        """What a claim learned of its partition: its oldest Pending sequences now."""
        self.queues[partition] = sorted(sequences)
        if complete:
            self.complete.add(partition)
        else:
            self.complete.discard(partition)

    @property
    def none_pending(self) -> bool:
        """The view was read and no partition had a Pending item left in it."""
        return self.read_at > -math.inf and not any(self.queues.values())

    def plan(self, limit: int, *, bounded: bool = True) -> list[ClaimTurn]:
        """The claims of the `limit` oldest known runs, one per partition holding some, by
        partition; [] when no partition is left. Unbounded (`bounded` False) once views kept
        going stale under other pumps' claims: progress comes first."""
        horizon = min((seqs[-1] for p, seqs in self.queues.items() if seqs and p not in self.complete),
                      default=math.inf)  # fmt: skip
        known = sorted((seq, p) for p, seqs in self.queues.items() for seq in seqs if seq <= horizon)
        counts = Counter(p for _, p in known[:limit])
        if not counts:
            waiting = sorted(p for p, seqs in self.queues.items() if not seqs)
            return [ClaimTurn(waiting[0], limit, None)] if waiting else []
        if len(known) < limit and horizon < math.inf:
            # Every run up to the horizon is planned: its partition may take further runs, as
            # long as they are older than what the plan leaves to the others.
            counts[min(p for p, seqs in self.queues.items() if seqs and seqs[-1] == horizon)] += limit - len(
                known
            )
        return [
            ClaimTurn(p, n, self._left_to_others(p, counts) if bounded else None)
            for p, n in sorted(counts.items())
        ]

    def _left_to_others(self, partition: int, counts: Counter[int]) -> int | None:
        """The oldest run the plan leaves Pending in the other partitions (None: none known)."""
        left = []
        for other, seqs in self.queues.items():
            taken = counts.get(other, 0)
            if other == partition or not seqs:
                continue
            if taken < len(seqs):
                left.append(seqs[taken])
            elif other not in self.complete:
                left.append(seqs[-1] + 1)  # its next runs are unknown: no older than this
        return min(left, default=None)

    def rate_limited(self, wait_ms: int) -> None:
        self.rate_wait_ms = wait_ms if self.rate_wait_ms is None else min(self.rate_wait_ms, wait_ms)

    def exhausted(self, partition: int) -> None:
        """Nothing claimable there for this cycle (empty, or only passed-over groups)."""
        self.queues.pop(partition, None)
        self.complete.discard(partition)
