"""Which shared-queue partition a pump claims from next: the fairness rule across partitions.

Owns `PartitionTurns`, one pump cycle's view of the partitions' heads (the queue sequence of
each partition's oldest Pending item, a clock in microseconds comparable across partitions)
and the choice it makes: the partition whose head is oldest, so the queue stays FIFO across
partitions (tenants hashed to different partitions wait alike, however many runs each
partition holds). A partition with claims in flight but nothing Pending is
still visited last (an expired claim goes back to Pending inside the claim); one with
neither is left out. Heads move as this cycle claims (the claim returns its partition's next
head) and as claims find a head newer than the view said (another pump claimed there: the
claim takes nothing and returns the real head); other writers' enqueues are seen when the
view is read again (`REFRESH_S`). Must not run scripts or read Redis.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

REFRESH_S = 0.25
"""How old a cycle's view of the partitions' heads may grow before it is read again."""


@dataclass
class PartitionTurns:
    heads: dict[int, float] = field(default_factory=dict)
    """Partition -> its head's sequence (inf: no Pending item, claims in flight)."""
    read_at: float = -math.inf
    rate_wait_ms: int | None = None
    """The soonest a group a tenant's dispatch rate limit passed over may be claimed (None: none)."""

    @property
    def stale(self) -> bool:
        return time.monotonic() - self.read_at > REFRESH_S

    def reset(self, pending_heads: dict[int, float | None], in_flight: set[int]) -> None:
        """A fresh view: each partition's head (None: nothing Pending) and the ones with claims."""
        self.heads = {
            partition: math.inf if head is None else head
            for partition, head in pending_heads.items()
            if head is not None or partition in in_flight
        }
        self.read_at = time.monotonic()

    @property
    def none_pending(self) -> bool:
        """The view was read and no partition had a Pending item left in it."""
        return self.read_at > -math.inf and all(head == math.inf for head in self.heads.values())

    def next(self) -> int | None:
        """The partition whose head is oldest (lowest index on a tie); None: none left."""
        if not self.heads:
            return None
        return min(self.heads, key=lambda partition: (self.heads[partition], partition))

    def runner_up(self, partition: int) -> float | None:
        """The oldest head among the other partitions (None: no other has a Pending item)."""
        others = [head for other, head in self.heads.items() if other != partition]
        oldest = min(others, default=math.inf)
        return None if oldest == math.inf else oldest

    def claimed(self, partition: int, next_head: float | None) -> None:
        self.heads[partition] = math.inf if next_head is None else next_head

    def rate_limited(self, wait_ms: int) -> None:
        self.rate_wait_ms = wait_ms if self.rate_wait_ms is None else min(self.rate_wait_ms, wait_ms)

    def exhausted(self, partition: int) -> None:
        """Nothing claimable there for this cycle (empty, or only passed-over groups)."""
        self.heads.pop(partition, None)
