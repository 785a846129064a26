"""What the Redis fault scenarios share: a gated multi-step pipeline and its observers.

Owns `PIPELINE` (start -> branches -> join, every step `test.faulty`), the executor that
holds every `start` step at a gate and counts executions per step, and the observer of
accepted completions and created executions, and the log of `store.unavailable` backoffs.
Used by the single-node SIGKILL scenario and
the Redis Cluster master-restart scenario.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from runtime_core.dag import EngineEvent
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.steps import StepInvocation

TENANT = ExecutionContextSnapshot(user_id="ops", tenant_id="tenant-faults", context_key="faults")
BRANCHES = 3
STEPS_PER_RUN = BRANCHES + 2
PIPELINE = parse_pipeline(
    {
        "name": "faults",
        "steps": [
            {"name": "start", "stepKey": "test.faulty"},
            *({"name": f"b{i}", "stepKey": "test.faulty", "dependsOn": ["start"]} for i in range(BRANCHES)),
            {"name": "join", "stepKey": "test.faulty", "dependsOn": [f"b{i}" for i in range(BRANCHES)]},
        ],
    }
)


class FaultyWorkExecutor:
    """`test.faulty`: counts executions per (execution, step); `start` waits for the gate."""

    step_key = "test.faulty"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.waiting = 0
        self.returned = 0

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.calls[(invocation.execution_id, invocation.step_name)] += 1
        if invocation.step_name == "start":
            self.waiting += 1
            await self.gate.wait()
        self.returned += 1
        return {"data": {"step": invocation.step_name, "run": invocation.state["run"]}}


class AcceptedCompletions:
    """Observer: accepted `step.completed` transitions and created executions."""

    def __init__(self) -> None:
        self.completed: Counter[tuple[str, str]] = Counter()
        self.created: list[str] = []

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "step.completed" and event.step_name is not None:
            self.completed[(event.execution_id, event.step_name)] += 1
        elif event.name == "execution.created":
            self.created.append(event.execution_id)


class OutageLog(logging.Handler):
    """Captures the structured `store.unavailable` backoff records of every component."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("store.unavailable"):
            self.records.append(record)

    def count(self, operation: str) -> int:
        return sum(1 for r in self.records if getattr(r, "operation", None) == operation)
