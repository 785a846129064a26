"""Submit-time step config checks: what a step's config refers to must exist in this runtime.

Owns running, for each step whose executor has a `check_config(config)` hook, the executor's
config model and that hook (e.g. `ai.prompt` and `rag.retrieval` name a configured provider),
and reporting the first problem as InvalidPipelineError naming the step. Must not run steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ValidationError

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import StepDefinition
from runtime_core.steps._config import StepConfigError, validation_problems
from runtime_core.steps._registry import ExecutorRegistry

STEP_CONFIG_RULE = "step_config"
PROVIDER_RULE = "provider_configured"


def check_step_configs(steps: Iterable[StepDefinition], registry: ExecutorRegistry) -> None:
    """Raise InvalidPipelineError for the first step whose config names what is not configured here."""
    for step in steps:
        executor = registry.get(step.step_key)
        check = getattr(executor, "check_config", None)
        model: type[BaseModel] | None = getattr(executor, "config_model", None)
        if check is None or model is None:
            continue
        what = f"Step '{step.name}' ({step.step_key})"
        try:
            config = model.model_validate(step.config)
        except ValidationError as error:
            raise InvalidPipelineError(
                STEP_CONFIG_RULE, f"{what} has an invalid config: {validation_problems(error)}"
            ) from None
        try:
            check(config)
        except StepConfigError as error:
            raise InvalidPipelineError(PROVIDER_RULE, f"{what}: {error.message}", hint=error.hint) from None
