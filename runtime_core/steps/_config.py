"""Typed step configuration: the pydantic base every executor's `config` model derives from.

Owns parsing `StepInvocation.config` into a model and turning a bad config into a permanent
StepFailure. Must not hold any executor behaviour.
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


def parse_config(model: type[ConfigT], invocation: StepInvocation) -> ConfigT:
    try:
        return model.model_validate(invocation.config)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc'])}: {issue['msg']}" for issue in error.errors()
        )
        raise StepFailure(
            f"step {invocation.step_name!r} ({invocation.step_key}) has an invalid config: {problems}",
            code="permanent",
        ) from error
