"""`assist.attempt`, a step plug-in given by reference (`tests.integration.assistance_steps:attempt`)
for the execution assistance tests: it records each attempt (execution, step, process id) as
one line appended to the file named by the run state's `attempts`, then, when its config says
`gated`, waits until the file named by the state's `gate` exists, then for the state's
`delay_ms` (a step that takes some time). Its result is the step name alone, so the terminal
fingerprint does not depend on which process ran a step.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from runtime_core.steps.api import StepConfig, StepInvocation, step, step_result

STEP_REFERENCE = "tests.integration.assistance_steps:attempt"


class AttemptConfig(StepConfig):
    gated: bool = False


@step("assist.attempt", config=AttemptConfig)
async def attempt(config: AttemptConfig, invocation: StepInvocation) -> dict[str, Any]:
    """Record the attempt, wait for the gate when gated, answer the step name."""
    line = f"{invocation.execution_id} {invocation.step_name} {os.getpid()}\n".encode()
    descriptor = os.open(invocation.state["attempts"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)  # one small O_APPEND write: lines of concurrent writers never mix
    finally:
        os.close(descriptor)
    gate = Path(invocation.state["gate"])
    delay_s = 0.005
    while config.gated and not await asyncio.to_thread(gate.exists):
        await asyncio.sleep(delay_s)  # waiting on the test, an outside actor
        delay_s = min(0.05, delay_s * 2)
    await asyncio.sleep(invocation.state.get("delay_ms", 0) / 1000)  # the step's own work
    return step_result({"step": invocation.step_name})


def attempts_by_step(path: Path, execution_id: str) -> dict[str, list[int]]:
    """Each step's attempts, as the process ids that made them, in order."""
    found: dict[str, list[int]] = {}
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        execution, step_name, pid = line.split()
        if execution == execution_id:
            found.setdefault(step_name, []).append(int(pid))
    return found


def open_gate(state: dict[str, object]) -> None:
    """Let the gated steps of runs with this state go on."""
    Path(str(state["gate"])).touch()
