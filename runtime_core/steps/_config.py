"""Typed step configuration: the pydantic base every executor's `config` model derives from.

Owns parsing `StepInvocation.config` into a model and turning a bad config into a permanent
StepFailure, and `StepConfigError`, what an executor's submit-time `check_config` raises when a
config refers to something this runtime does not have (an unconfigured provider). Must not
hold any executor behaviour.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from runtime_core.steps._executor import StepFailure, StepInvocation


class StepConfig(BaseModel):
    """Pipeline JSON uses camelCase (`providerKey`); engine-level keys (retry, ...) are ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


ConfigT = TypeVar("ConfigT", bound=StepConfig)


class StepConfigError(Exception):
    """A step config that cannot run here; `hint` says what to configure. `rule`: the submit-time
    rule it breaks (None: the step's `check_config` hook refused it)."""

    def __init__(self, message: str, *, hint: str | None = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.rule = rule


def parse_config(model: type[ConfigT], invocation: StepInvocation) -> ConfigT:
    try:
        return model.model_validate(invocation.config)
    except ValidationError as error:
        raise StepFailure(
            f"step {invocation.step_name!r} ({invocation.step_key}) has an invalid config: "
            f"{validation_problems(error)}",
            code="permanent",
        ) from error


def validation_problems(error: ValidationError) -> str:
    """`field.path: message; ...` for each problem, never the offending value (it may be a secret)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in issue['loc']) or '(root)'}: {issue['msg']}"
        for issue in error.errors()
    )
