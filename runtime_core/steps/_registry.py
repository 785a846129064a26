"""ExecutorRegistry: the step executors of one process by stepKey, built-ins and plug-ins alike.

Owns registration (each executor checked against the step API, its source remembered),
lookup, and the published descriptions. Must not discover plug-ins (`runtime_core.plugins`
does) nor run steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from runtime_core.errors import NotFoundError
from runtime_core.steps._executor import StepExecutor
from runtime_core.steps.api import (
    BUILTIN_SOURCE,
    StepDescription,
    check_step_definition,
    config_model_of,
    default_retry_of,
    describe_step,
)

ANY_INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""The expected input of a waiting step whose executor declares no `input_schema`."""


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

    def default_retry(self, step_key: str) -> dict[str, Any] | None:
        """The `retry` section of a step of this type whose config has none (None: no retries)."""
        executor = self._executors.get(step_key)
        return None if executor is None else default_retry_of(executor)

    def expected_input(self, step_key: str, waiting_key: str | None = None) -> dict[str, Any]:
        """JSON Schema of the human input the step waits for under `waiting_key`: its
        `input_schema_for(waiting_key)` when it asks several questions, else its `input_schema`,
        else any object."""
        executor = self._executors.get(step_key)
        for_key = getattr(executor, "input_schema_for", None)
        schema = for_key(waiting_key) if callable(for_key) else getattr(executor, "input_schema", None)
        return dict(schema) if isinstance(schema, dict) else dict(ANY_INPUT_SCHEMA)

    def describe(self, step_key: str | None = None) -> list[StepDescription]:
        """Every step type's description, or just `step_key`'s (NotFoundError when unknown)."""
        if step_key is not None and step_key not in self._executors:
            raise NotFoundError(
                f"No step type '{step_key}' is registered.", hint="Registered: " + ", ".join(self.keys())
            )
        keys = self.keys() if step_key is None else [step_key]
        return [describe_step(self._executors[key], self._sources[key]) for key in keys]

    def __contains__(self, step_key: object) -> bool:
        return step_key in self._executors

    def keys(self) -> list[str]:
        return sorted(self._executors)
