"""Submit-time step config checks: every step's `config` is valid for its step type here.

Owns running, for each step, its executor's config model on the step's `config` (the seed's
"required config values exist" rule: a missing or mistyped field is refused before anything
is queued, with the step and the field named) and then the executor's optional
`check_config(config)` hook (e.g. `ai.prompt` and `rag.retrieval` name a configured
provider), reporting the first problem as InvalidPipelineError; and, for a submitting tenant,
each executor's optional async `check_for_tenant(config, step, snapshot)` hook (`mcp.tool`: the
tenant's own server, the tool's input schema). Must not run steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from runtime_core.errors import InvalidPipelineError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import StepDefinition
from runtime_core.steps._config import StepConfigError, validation_problems
from runtime_core.steps._registry import ExecutorRegistry

STEP_CONFIG_RULE = "step_config"
PROVIDER_RULE = "provider_configured"
TENANT_RULE = "tenant_step_check"


def check_step_configs(steps: Iterable[StepDefinition], registry: ExecutorRegistry) -> None:
    """Raise InvalidPipelineError for the first step whose config does not fit its step type here."""
    for step in steps:
        executor, model = registry.get(step.step_key), registry.config_model(step.step_key)
        if executor is None or model is None:
            continue  # an unregistered key is the `step_keys_registered` rule's to report
        what = f"Step '{step.name}' ({step.step_key})"
        try:
            config = model.model_validate(step.config)
        except ValidationError as error:
            raise InvalidPipelineError(
                STEP_CONFIG_RULE,
                f"{what} has an invalid config: {validation_problems(error)}",
                hint=f"Fix the named config field(s); `mcp-runtime steps {step.step_key}` or the MCP "
                f"resource step://{step.step_key} shows the config schema.",
            ) from None
        check = getattr(executor, "check_config", None)
        if check is None:
            continue
        try:
            check(config)
        except StepConfigError as error:
            raise InvalidPipelineError(PROVIDER_RULE, f"{what}: {error.message}", hint=error.hint) from None


async def check_steps_for_tenant(
    steps: Iterable[StepDefinition], registry: ExecutorRegistry, snapshot: ExecutionContextSnapshot
) -> None:
    """Raise InvalidPipelineError for the first step the submitting tenant cannot run (after
    `check_step_configs` passed): its executor's `check_for_tenant` raised StepConfigError."""
    for step in steps:
        executor, model = registry.get(step.step_key), registry.config_model(step.step_key)
        check = getattr(executor, "check_for_tenant", None)
        if check is None or model is None:
            continue
        try:
            await check(model.model_validate(step.config), step, snapshot)
        except StepConfigError as error:
            what = f"Step '{step.name}' ({step.step_key})"
            raise InvalidPipelineError(TENANT_RULE, f"{what}: {error.message}", hint=error.hint) from None
