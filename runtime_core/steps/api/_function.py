"""Function steps: `@step("vendor.action", config=MyConfig)` turns an async function into a step.

Owns FunctionStep (the executor wrapping the function: it parses the invocation's config
into the declared model, then awaits `function(config, invocation)`) and the `step`
decorator. Must not register the step: the runtime finds it through an entry point or a
`module:attr` reference.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepInvocation
from runtime_core.steps.api._definition import check_step_definition, first_paragraph

ConfigT = TypeVar("ConfigT", bound=StepConfig)

StepFunction = Callable[[ConfigT, StepInvocation], Awaitable[Any]]
"""`async def my_step(config: MyConfig, invocation: StepInvocation) -> result`."""


class FunctionStep(Generic[ConfigT]):
    """A step executor made from an async function; `function` stays callable for unit tests."""

    def __init__(
        self,
        function: StepFunction[ConfigT],
        *,
        step_key: str,
        config_model: type[ConfigT],
        description: str,
        input_schema: dict[str, Any] | None = None,
        default_retry: dict[str, Any] | None = None,
    ) -> None:
        self.function = function
        self.step_key = step_key
        self.config_model = config_model
        self.description = description
        self.input_schema = input_schema
        self.default_retry = default_retry

    async def execute(self, invocation: StepInvocation) -> Any:
        return await self.function(parse_config(self.config_model, invocation), invocation)

    def __repr__(self) -> str:
        return f"FunctionStep({self.step_key!r}, {self.function.__module__}.{self.function.__qualname__})"


def step(
    step_key: str,
    *,
    config: type[ConfigT] = StepConfig,  # type: ignore[assignment]
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    default_retry: dict[str, Any] | None = None,
) -> Callable[[StepFunction[ConfigT]], FunctionStep[ConfigT]]:
    """Declare an async function `(config, invocation) -> result` as the step `step_key`.

    `config` is the pydantic model of the step's `config` (derive it from StepConfig); the
    description defaults to the first paragraph of the function's docstring; `default_retry`
    is the `retry` section used when a step's config has none (`PROVIDER_RETRY` for a step
    that calls a provider).
    """

    def declare(function: StepFunction[ConfigT]) -> FunctionStep[ConfigT]:
        if not inspect.iscoroutinefunction(function):
            raise TypeError(
                f"@step({step_key!r}) needs an `async def` function, not {function.__qualname__!r}"
            )
        declared = FunctionStep(
            function,
            step_key=step_key,
            config_model=config,
            description=description if description is not None else first_paragraph(function),
            input_schema=input_schema,
            default_retry=default_retry,
        )
        check_step_definition(declared)
        return declared

    return declare
