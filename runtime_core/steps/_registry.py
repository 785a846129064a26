"""ExecutorRegistry: the step executors of one process by stepKey, built-ins and plug-ins alike.

Owns registration (each executor checked against the step API, its source remembered),
lookup, and the published descriptions. Must not discover plug-ins (`runtime_core.plugins`
does) nor run steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from runtime_core.steps._executor import StepExecutor
from runtime_core.steps.api import (
    BUILTIN_SOURCE,
    StepDescription,
    check_step_definition,
    config_model_of,
    describe_step,
)


class ExecutorRegistry:
    def __init__(self, executors: Iterable[StepExecutor] = ()) -> None:
        self._executors: dict[str, StepExecutor] = {}
        self._sources: dict[str, str] = {}
        for executor in executors:
            self.register(executor)

    def register(self, executor: StepExecutor, *, source: str = BUILTIN_SOURCE) -> None:
        """Add (or replace) the executor of `executor.step_key`; StepDefinitionError when it is not one."""
        check_step_definition(executor)
        self._executors[executor.step_key] = executor
        self._sources[executor.step_key] = source

    def get(self, step_key: str) -> StepExecutor | None:
        return self._executors.get(step_key)

    def source(self, step_key: str) -> str | None:
        """Where the step came from: `builtin`, an entry point or a `module:attr` reference."""
        return self._sources.get(step_key)

    def config_model(self, step_key: str) -> type[BaseModel] | None:
        executor = self._executors.get(step_key)
        return None if executor is None else config_model_of(executor)

    def input_schema(self, step_key: str) -> dict[str, Any] | None:
        """The JSON Schema of the human input the step waits for, when it declares one."""
        schema = getattr(self._executors.get(step_key), "input_schema", None)
        return dict(schema) if isinstance(schema, dict) else None

    def describe(self) -> list[StepDescription]:
        return [describe_step(self._executors[key], self._sources[key]) for key in self.keys()]

    def __contains__(self, step_key: object) -> bool:
        return step_key in self._executors

    def keys(self) -> list[str]:
        return sorted(self._executors)
