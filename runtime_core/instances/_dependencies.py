"""What a runtime instance needs from the rest of the runtime, as one typed object.

Owns the `ExecutionCanceller` protocol (the execution-control bridge used by running-run
cancellation; `runtime_core.control.ExecutionControlService` satisfies it) and
`InstanceDependencies`. Must not build any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runtime_core.dag import DagEngine
from runtime_core.events import RunEventPublisher
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._registry import InstanceRegistry
from runtime_core.instances._run_index import RunExecutionIndex


class ExecutionCanceller(Protocol):
    async def cancel(
        self, execution_id: str, snapshot: ExecutionContextSnapshot, *, reason: str = ""
    ) -> Any: ...


@dataclass(frozen=True)
class InstanceDependencies:
    """`engine` is a prototype: each run advances a copy named after the instance; `events`
    (optional) publishes the end of each local run."""

    engine: DagEngine
    registry: InstanceRegistry
    index: RunExecutionIndex
    canceller: ExecutionCanceller
    events: RunEventPublisher | None = None
