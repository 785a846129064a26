"""Submit-time step config checks: every step's `config` is valid for its step type here.

Owns running, for each step (and, through `check_step_config`, for anything configured like a
step: an agent's tools), the key check (a key its step type does not declare, a typo the
config model would silently drop, is refused with the key meant: "did you mean `maxTokens`?"),
its executor's config model on the step's `config` (the seed's "required config values exist"
rule: a missing or mistyped field is refused before anything is queued, with the step and the
field named) and then the executor's optional `check_config(config)` hook (e.g. `ai.prompt` and
`rag.retrieval` name a configured provider), reporting the first problem as
InvalidPipelineError; and, for a submitting tenant, each executor's optional async
`check_for_tenant(config, step, snapshot)` hook (`mcp.tool`: the tenant's own server, the tool's
input schema). Must not run steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from runtime_core.errors import InvalidPipelineError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import StepDefinition
from runtime_core.steps._config import StepConfigError, validation_problems
from runtime_core.steps._config_keys import retry_section_key, unknown_config_keys
from runtime_core.steps._registry import ExecutorRegistry

STEP_CONFIG_RULE = "step_config"
PROVIDER_RULE = "provider_configured"
TENANT_RULE = "tenant_step_check"


def check_step_configs(steps: Iterable[StepDefinition], registry: ExecutorRegistry) -> None:
    """Raise InvalidPipelineError for the first step whose config does not fit its step type here."""
    for step in steps:
        try:
            check_step_config(registry, step.step_key, step.config, f"Step '{step.name}' ({step.step_key})")
        except StepConfigError as error:
            raise InvalidPipelineError(error.rule or PROVIDER_RULE, error.message, hint=error.hint) from None


def check_step_config(registry: ExecutorRegistry, step_key: str, config: dict[str, Any], what: str) -> None:
    """Raise StepConfigError (its message starts with `what`, its `rule` says which check) when
    `config` does not fit step type `step_key` here: an unknown key, an invalid value, or what
    the executor's `check_config` hook refuses. The checks a step's config gets at submit, for
    anything else configured as a step (an agent's tool). An unregistered `step_key` passes."""
    executor, model = registry.get(step_key), registry.config_model(step_key)
    if executor is None or model is None:
        return  # an unregistered key is the `step_keys_registered` rule's to report
    _refuse_unknown_keys(what, step_key, model, config)
    try:
        parsed = model.model_validate(config)
    except ValidationError as error:
        raise StepConfigError(
            f"{what} has an invalid config: {validation_problems(error)}",
            hint=f"Fix the named config field(s); `mcp-runtime steps {step_key}` or the MCP "
            f"resource step://{step_key} shows the config schema.",
            rule=STEP_CONFIG_RULE,
        ) from None
    check = getattr(executor, "check_config", None)
    if check is None:
        return
    try:
        check(parsed)
    except StepConfigError as error:
        raise StepConfigError(
            f"{what}: {error.message}", hint=error.hint, rule=error.rule or PROVIDER_RULE
        ) from None


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


def _refuse_unknown_keys(what: str, step_key: str, model: type[BaseModel], config: dict[str, Any]) -> None:
    unknown = unknown_config_keys(model, config)
    if not unknown:
        return
    first = unknown[0]
    retry_key = retry_section_key(first.key) if first.path == first.key else None
    if retry_key is not None:
        meant = f'`{first.key}` belongs in the `retry` section: "retry": {{"{retry_key}": ...}}.'
    elif first.suggestion is not None:
        meant = f"did you mean `{first.suggestion}`?"
    else:
        meant = "no key of this step type is close to it."
    others = f" ({len(unknown) - 1} more unknown key(s) after it.)" if len(unknown) > 1 else ""
    raise StepConfigError(
        f"{what} has an unknown config key `{first.path}`: {meant}{others}",
        hint=f"Known keys here: {', '.join(first.known)}. `mcp-runtime steps {step_key}` or the MCP "
        f"resource step://{step_key} shows the config schema.",
        rule=STEP_CONFIG_RULE,
    )
