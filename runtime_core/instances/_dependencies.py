"""What a runtime instance needs from the rest of the runtime, as one typed object.

Owns the `ExecutionCanceller` protocol (the execution-control bridge used by running-run
cancellation; `runtime_core.control.ExecutionControlService` satisfies it), the
`LostStateRestorer` protocol (what an instance asks after the Redis dataset was lost:
`runtime_core.continuity.HotStateContinuity` satisfies it) and `InstanceDependencies`. Must
not build any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime_core.dag import DagEngine
from runtime_core.events import RunEventPublisher
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._doorbell import UnparkDoorbell
from runtime_core.instances._models import LocalRunRequest
from runtime_core.instances._registry import InstanceRegistry
from runtime_core.instances._run_index import RunExecutionIndex, RunIndexRecord


class ExecutionCanceller(Protocol):
    async def cancel(
        self, execution_id: str, snapshot: ExecutionContextSnapshot, *, reason: str = ""
    ) -> Any: ...


class LostStateRestorer(Protocol):
    async def restore_shared_run(self, request: LocalRunRequest, record: RunIndexRecord) -> None:
        """Recreate the lost shared run record of a local run this instance holds."""
        ...

    async def restore_execution(
        self, execution_id: str, snapshot: ExecutionContextSnapshot, record: RunIndexRecord, epoch: str
    ) -> bool:
        """Recreate a lost execution from its durable copy (held by local run `record`, in the new
        dataset `epoch`); False when there is none."""
        ...


@dataclass(frozen=True)
class InstanceDependencies:
    """`engine` is a prototype: each run advances a copy named after the instance; `events`
    (optional) publishes the end of each local run. Without `restorer`, runs whose hot state
    was lost fail with `hot_state_lost`. `on_capacity` (optional) is called when an instance
    published capacity that can accept a run after a local change (a run ended, a queue resumed).
    `doorbell` wakes parked runs when they are unparked (default: they poll their control state).
    """

    engine: DagEngine
    registry: InstanceRegistry
    index: RunExecutionIndex
    canceller: ExecutionCanceller
    restorer: LostStateRestorer | None = None
    events: RunEventPublisher | None = None
    on_capacity: Callable[[], None] | None = None
    doorbell: UnparkDoorbell = field(default_factory=lambda: UnparkDoorbell(None))
