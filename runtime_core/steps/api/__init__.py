"""The public step API: what a step is written with, for built-in steps and plug-ins alike.

A step is either
- an async function `(config, invocation) -> result` declared with `@step("vendor.action",
  config=MyConfig)`, or
- a class with `step_key`, `config_model` and `async def execute(self, invocation)` that
  reads its config with `parse_config(self.config_model, invocation)` (the built-ins' form).

Its config model derives from `StepConfig` (camelCase in pipeline JSON, unknown keys such as
the engine's `retry` / `concurrency` / `timeoutMs` ignored); `submit` and `pipelines.validate`
validate every step's `config` against it, and its JSON Schema is published. Optional:
`description`, `input_schema` (the human input a step that raises StepParked expects) and
`check_config(config)` (raise StepConfigError when the config names something this runtime
lacks) and `default_retry` (the `retry` section used when a step's config has none: a step
calling a provider uses `PROVIDER_RETRY`). A step returns JSON (`step_result(data, **meta)`
gives the `{"data": ...}` envelope bindings read) or raises StepFailure(code=...) / StepParked.
Publish steps with an entry point in group STEP_ENTRY_POINT_GROUP, or name them as
`module:attr` (`--steps`).

Owns only this surface. Must not register, discover or run steps.
"""

from runtime_core.policy import PROVIDER_RETRY
from runtime_core.steps._config import StepConfig, StepConfigError, parse_config
from runtime_core.steps._executor import StepExecutor, StepFailure, StepInvocation, StepParked
from runtime_core.steps._results import canonical, step_result, unwrap_result
from runtime_core.steps.api._definition import (
    STEP_ENTRY_POINT_GROUP,
    STEP_KEY_PATTERN,
    StepDefinitionError,
    check_step_definition,
    config_model_of,
    default_retry_of,
)
from runtime_core.steps.api._description import BUILTIN_SOURCE, StepDescription, describe_step
from runtime_core.steps.api._function import FunctionStep, StepFunction, step

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Writing a step
    "step",
    "FunctionStep",
    "StepFunction",
    "StepExecutor",
    "StepConfig",
    "parse_config",
    # What a step gets and returns
    "StepInvocation",
    "step_result",
    "unwrap_result",
    "canonical",
    # How a step fails or waits
    "StepFailure",
    "StepParked",
    "StepConfigError",
    "PROVIDER_RETRY",
    # Publishing and describing steps
    "STEP_ENTRY_POINT_GROUP",
    "STEP_KEY_PATTERN",
    "StepDefinitionError",
    "check_step_definition",
    "config_model_of",
    "default_retry_of",
    "StepDescription",
    "describe_step",
    "BUILTIN_SOURCE",
]
