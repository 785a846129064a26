"""Executor registry by stepKey."""

from __future__ import annotations

from collections.abc import Iterable

from runtime_core.steps._executor import StepExecutor


class ExecutorRegistry:
    def __init__(self, executors: Iterable[StepExecutor] = ()) -> None:
        self._executors: dict[str, StepExecutor] = {}
        for executor in executors:
            self.register(executor)

    def register(self, executor: StepExecutor) -> None:
        self._executors[executor.step_key] = executor

    def get(self, step_key: str) -> StepExecutor | None:
        return self._executors.get(step_key)

    def __contains__(self, step_key: object) -> bool:
        return step_key in self._executors

    def keys(self) -> list[str]:
        return sorted(self._executors)
