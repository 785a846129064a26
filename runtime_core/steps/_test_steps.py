"""Test step executors: `test.noop` (cheap, for benchmarks and fan-out; `waitMs` makes it wait
like a call to a peer), `test.flaky` (retries) and `test.wait_for_file` (a crash threshold an
outside actor releases by creating a file).

Owns only these deterministic behaviours: each result depends on the invocation alone, never
on timing. Must not touch any external resource beyond checking that one file exists.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._results import step_result


class NoopConfig(StepConfig):
    """Any other key is accepted, as it always was: tests give no-op steps the configs of the
    step types they stand in for."""

    model_config = ConfigDict(extra="allow")

    wait_ms: float = Field(default=0, ge=0, le=60_000)


class NoopExecutor:
    """Returns the step name; with `waitMs`, after waiting that long without using the CPU (a
    step whose time goes to a peer's answer, as a model or database call's does)."""

    step_key = "test.noop"
    config_model = NoopConfig
    description = "Return the step name, after waitMs milliseconds when set (tests and benchmarks)."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        if invocation.config:  # the bare step parses nothing: it is the benchmarks' cheapest step
            config = parse_config(NoopConfig, invocation)
            if config.wait_ms:
                await asyncio.sleep(config.wait_ms / 1000)  # the peer's response time it stands for
        return {"data": {"step": invocation.step_name}}


class FlakyConfig(StepConfig):
    fail_times: int = Field(default=1, ge=0)


class FlakyExecutor:
    """Fails with code `transient` while `invocation.attempt < config.failTimes`, then succeeds."""

    step_key = "test.flaky"
    config_model = FlakyConfig
    description = "Fail with code transient for the first failTimes attempts, then succeed (tests)."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(FlakyConfig, invocation)
        if invocation.attempt < config.fail_times:
            raise StepFailure(
                f"test.flaky step {invocation.step_name!r} fails attempt {invocation.attempt} "
                f"of the first {config.fail_times}",
                code="transient",
            )
        return step_result({"failTimes": config.fail_times, "step": invocation.step_name})


class WaitForFileConfig(StepConfig):
    """`path`, or `pathFromState`: the name of the execution state field holding the path."""

    path: str | None = None
    path_from_state: str | None = None
    first_poll_ms: int = Field(default=10, ge=1)
    max_poll_ms: int = Field(default=200, ge=1)


class WaitForFileExecutor:
    """Polls (backing off from `firstPollMs` to `maxPollMs`) until the file exists, then returns
    `{"data": {"step": <name>}}`: a step that holds an execution mid-DAG until released."""

    step_key = "test.wait_for_file"
    config_model = WaitForFileConfig
    description = "Wait until a file exists, then succeed (crash tests)."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(WaitForFileConfig, invocation)
        path = Path(_watched_path(config, invocation))
        delay_ms = config.first_poll_ms
        while not await asyncio.to_thread(path.exists):
            await asyncio.sleep(delay_ms / 1000)  # waiting on an outside actor, not on our own work
            delay_ms = min(delay_ms * 2, config.max_poll_ms)
        return step_result({"step": invocation.step_name})


def _watched_path(config: WaitForFileConfig, invocation: StepInvocation) -> str:
    if config.path is not None:
        return config.path
    value = invocation.state.get(config.path_from_state) if config.path_from_state else None
    if not isinstance(value, str) or not value:
        raise StepFailure(
            f"test.wait_for_file step {invocation.step_name!r} needs config.path, or "
            f"config.pathFromState naming a state field that holds a path (got {value!r})",
            code="permanent",
        )
    return value
