"""Test step executors: `test.noop` (cheap, for benchmarks and fan-out) and `test.flaky` (retries).

Owns only these two deterministic behaviours. Must not touch any external resource.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._results import step_result


class NoopExecutor:
    step_key = "test.noop"
    config_model = StepConfig

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        return {"data": {"step": invocation.step_name}}


class FlakyConfig(StepConfig):
    fail_times: int = Field(default=1, ge=0)


class FlakyExecutor:
    """Fails with code `transient` while `invocation.attempt < config.failTimes`, then succeeds."""

    step_key = "test.flaky"
    config_model = FlakyConfig

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(FlakyConfig, invocation)
        if invocation.attempt < config.fail_times:
            raise StepFailure(
                f"test.flaky step {invocation.step_name!r} fails attempt {invocation.attempt} "
                f"of the first {config.fail_times}",
                code="transient",
            )
        return step_result({"failTimes": config.fail_times, "step": invocation.step_name})
