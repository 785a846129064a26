"""Builders shared by the execution-control and engine-concurrency tests: a real Redis DAG
engine with execution control attached, an event recorder, and executors that hold steps
"running" until the test releases them (no sleeps)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_core.control import ExecutionControlService, attach_execution_control
from runtime_core.dag import DagEngine, DagStore, EngineEvent, EngineSettings
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.policy import RetryEngine
from runtime_core.steps import StepInvocation, default_executor_registry

TENANT_A = ExecutionContextSnapshot(user_id="alice", tenant_id="tenant-a")
TENANT_B = ExecutionContextSnapshot(user_id="bob", tenant_id="tenant-b")


class RecordingObserver:
    """Keeps every engine and control event in order."""

    def __init__(self) -> None:
        self.events: list[EngineEvent] = []

    async def on_event(self, event: EngineEvent) -> None:
        self.events.append(event)

    def named(self, name: str) -> list[EngineEvent]:
        return [event for event in self.events if event.name == name]

    def attributes(self, name: str) -> list[dict[str, Any]]:
        """The attributes of each event named `name`, in order."""
        return [event.attributes for event in self.named(name)]


class HoldExecutor:
    """`test.hold`: steps named in `held` block until `release(name)`; others return at once."""

    step_key = "test.hold"

    def __init__(self, *held: str) -> None:
        self.gates = {name: asyncio.Event() for name in held}
        self.calls: list[str] = []

    def release(self, *names: str) -> None:
        for name in names or tuple(self.gates):
            self.gates[name].set()

    async def started(self, *names: str) -> bool:
        return all(name in self.calls for name in names)

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.calls.append(invocation.step_name)
        gate = self.gates.get(invocation.step_name)
        if gate is not None:
            await gate.wait()
        return {"data": {"step": invocation.step_name, "inputs": invocation.inputs}}


class QueueExecutor:
    """`test.queue`: every call blocks until the test releases calls one by one (oldest first);
    records how many were running at the same time."""

    step_key = "test.queue"

    def __init__(self) -> None:
        self.waiting: list[asyncio.Event] = []
        self.running = 0
        self.max_running = 0
        self.completed = 0

    async def unreleased(self) -> int:
        return sum(1 for gate in self.waiting if not gate.is_set())

    def release_oldest(self) -> None:
        next(gate for gate in self.waiting if not gate.is_set()).set()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        gate = asyncio.Event()
        self.waiting.append(gate)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await gate.wait()
        finally:
            self.running -= 1
            self.completed += 1
        return {"data": {"step": invocation.step_name}}


@dataclass
class ControlledRuntime:
    engine: DagEngine
    control: ExecutionControlService
    observer: RecordingObserver = field(default_factory=RecordingObserver)

    @property
    def store(self) -> DagStore:
        return self.engine.store


def controlled_runtime(
    hot_state: HotState, *executors: object, data_dir: Path | None = None, lease_ms: int = 60_000
) -> ControlledRuntime:
    registry = default_executor_registry(data_dir)
    for executor in executors:
        registry.register(executor)  # type: ignore[arg-type]
    observer = RecordingObserver()
    engine = DagEngine(
        DagStore(hot_state),
        registry,
        RetryEngine(),
        settings=EngineSettings(lease_ms=lease_ms),
        observer=observer,
    )
    control = ExecutionControlService(hot_state)
    attach_execution_control(engine, control)
    return ControlledRuntime(engine, control, observer)
