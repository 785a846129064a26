"""Per-item recovery claims: each local run of a dead incarnation is recovered exactly once.

Owns the typed wrappers of `claim_recovery_item` and `complete_recovery_item` (the only
place that knows their KEYS/ARGV order). A claim carries a lease, so an item whose
reconciler died mid-recovery is taken over later; a Done item is never claimed again.
Must not recover anything itself.
"""

from __future__ import annotations

from enum import Enum

from runtime_core.hot_state import HotState
from runtime_core.instances import InstanceRegistry
from runtime_core.recovery._keys import recovery_claims_key


class ItemClaimOutcome(Enum):
    CLAIMED = 1
    HELD_ELSEWHERE = 0
    ALREADY_DONE = 2
    INCARNATION_ALIVE = -1


class RecoveryClaims:
    def __init__(self, registry: InstanceRegistry, *, reconciler_id: str, lease_ms: int) -> None:
        self.registry = registry
        self.reconciler_id = reconciler_id
        self.lease_ms = lease_ms

    @property
    def hot_state(self) -> HotState:
        return self.registry.hot_state

    async def claim(self, runtime_instance_id: str, local_run_id: str, incarnation: str) -> ItemClaimOutcome:
        """`incarnation`: the one that accepted the local run; it must be dead (Unsafe or superseded)."""
        reply = await self.hot_state.scripts["claim_recovery_item"](
            keys=[
                self.registry.keys(runtime_instance_id).registry,
                recovery_claims_key(self.hot_state, runtime_instance_id),
            ],
            args=[local_run_id, self.reconciler_id, self.lease_ms, incarnation],
        )
        return ItemClaimOutcome(int(reply[0]))

    async def complete(self, runtime_instance_id: str, local_run_id: str, outcome: str) -> bool:
        """Done: the item is never recovered again."""
        return await self._close(runtime_instance_id, local_run_id, "done", outcome)

    async def retry_later(self, runtime_instance_id: str, local_run_id: str) -> bool:
        """Drop the claim: a later pass (of any reconciler) tries the item again."""
        return await self._close(runtime_instance_id, local_run_id, "retry", "")

    async def _close(self, runtime_instance_id: str, local_run_id: str, mode: str, outcome: str) -> bool:
        reply = await self.hot_state.scripts["complete_recovery_item"](
            keys=[recovery_claims_key(self.hot_state, runtime_instance_id)],
            args=[local_run_id, self.reconciler_id, mode, outcome],
        )
        return int(reply[0]) == 1
