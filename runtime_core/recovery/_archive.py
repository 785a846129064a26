"""What recovery asks the durable store about an execution whose hot state is gone.

Owns the `ExecutionArchive` protocol (the terminal status of an execution, from its durable
terminal snapshot) and its DurableStore-backed implementation. A local run whose instance
died after its execution finished, but before the run was closed, keeps its result this
way even when the execution's Redis keys were already retired. Must not restore anything.
"""

from __future__ import annotations

from typing import Protocol

from runtime_core.storage import DurableStore


class ExecutionArchive(Protocol):
    async def terminal_status(self, execution_id: str, tenant_id: str) -> str | None:
        """The status of the execution's terminal snapshot; None when it has none."""
        ...


class DurableSnapshots:
    def __init__(self, store: DurableStore) -> None:
        self.store = store

    async def terminal_status(self, execution_id: str, tenant_id: str) -> str | None:
        snapshot = await self.store.get_snapshot(execution_id, tenant_id)
        return snapshot.status if snapshot is not None else None
