"""LifecycleSchedule: the ZSETs of finished work waiting for its grace, and their leased claims.

Owns the typed wrapper of `lifecycle_claim_due` (the only place that knows its KEYS/ARGV)
and the schedule of executions a replay restored. The other two schedules belong to their
writers: ended local runs (`RunExecutionIndex.ended_key`, written with the terminal index
record) and shared runs that ended before dispatch (each queue partition's `ended`, written
by the shared-queue scripts). Must not archive anything.
"""

from __future__ import annotations

from runtime_core.hot_state import HotState


class LifecycleSchedule:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state

    @property
    def restored_key(self) -> str:
        """Executions a replay restored into Redis, by restore time (dropped again after the grace)."""
        return self.hot_state.key("lifecycle", "restored")

    async def claim_due(self, key: str, *, grace_ms: int, lease_ms: int, limit: int) -> list[str]:
        """Members of `key` whose grace is over, leased to this caller for `lease_ms`."""
        reply = await self.hot_state.scripts["lifecycle_claim_due"](
            keys=[key], args=[grace_ms, lease_ms, limit]
        )
        return [str(member) for member in reply[1:]]

    async def restored(self, execution_id: str) -> None:
        """Schedule a restored execution's keys to go again once the grace passed."""
        now = await self.hot_state.server_time_ms()
        await self.hot_state.redis.zadd(self.restored_key, {execution_id: now})

    async def done(self, key: str, member: str) -> None:
        await self.hot_state.redis.zrem(key, member)
