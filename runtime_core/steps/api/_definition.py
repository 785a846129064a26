"""What makes an object a step executor, checked once when it is registered.

Owns the rules every step (built-in or plug-in) meets: a `step_key` matching STEP_KEY_PATTERN,
an `async def execute(invocation)`, a `config_model` deriving from pydantic's BaseModel (the
`StepConfig` base when absent), and optional `description`, `input_schema`, `check_config` and
`default_retry` (the `retry` section used when a step's config has none).
Breaking a rule raises StepDefinitionError naming the object and the rule. Must not register,
load or run anything.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy import RetryConfig
from runtime_core.steps._config import StepConfig

STEP_ENTRY_POINT_GROUP = "mcp_runtime.steps"
"""The Python entry point group the runtime discovers step plug-ins in."""

STEP_KEY_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,199}$")


class StepDefinitionError(TypeError):
    """An object offered as a step does not meet the step API; the message says which rule."""


def check_step_definition(executor: Any) -> None:
    """Raise StepDefinitionError unless `executor` is a usable step executor."""
    what = _name_of(executor)
    step_key = getattr(executor, "step_key", None)
    if not isinstance(step_key, str) or not STEP_KEY_PATTERN.match(step_key):
        raise StepDefinitionError(
            f"{what} needs a `step_key` string like 'vendor.action' (letters, digits, '_', '.', ':', '-'; "
            f"starting with a letter), not {step_key!r}"
        )
    if not inspect.iscoroutinefunction(getattr(executor, "execute", None)):
        raise StepDefinitionError(
            f"step {step_key!r} ({what}) needs an `async def execute(self, invocation)`"
        )
    model = getattr(executor, "config_model", StepConfig)
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise StepDefinitionError(
            f"step {step_key!r} ({what}) has a `config_model` that is not a pydantic model class: {model!r}"
        )
    check = getattr(executor, "check_config", None)
    if check is not None and not callable(check):
        raise StepDefinitionError(f"step {step_key!r} ({what}) has a `check_config` that is not callable")
    schema = getattr(executor, "input_schema", None)
    if schema is not None and not isinstance(schema, dict):
        raise StepDefinitionError(
            f"step {step_key!r} ({what}) has an `input_schema` that is not a JSON object"
        )
    _check_default_retry(executor, f"step {step_key!r} ({what})")


def _check_default_retry(executor: Any, what: str) -> None:
    retry = getattr(executor, "default_retry", None)
    if retry is None:
        return
    if not isinstance(retry, Mapping):
        raise StepDefinitionError(f"{what} has a `default_retry` that is not a `retry` section (a mapping)")
    try:
        RetryConfig.parse(dict(retry), "default_retry")
    except InvalidPipelineError as error:
        raise StepDefinitionError(f"{what}: {error.message}") from None


def config_model_of(executor: Any) -> type[BaseModel]:
    """The executor's config model; `StepConfig` (any object, keys ignored) when it declares none."""
    model: type[BaseModel] = getattr(executor, "config_model", StepConfig)
    return model


def default_retry_of(executor: Any) -> dict[str, Any] | None:
    """The `retry` section the step type uses when a step's config has none (None: no retries)."""
    retry = getattr(executor, "default_retry", None)
    return dict(retry) if retry is not None else None


def description_of(executor: Any) -> str:
    """`executor.description`, else the first paragraph of its class docstring, else ''."""
    description = getattr(executor, "description", None)
    if isinstance(description, str):
        return description
    return first_paragraph(type(executor))


def first_paragraph(documented: object) -> str:
    """The first paragraph of an object's docstring on one line ('' without a docstring)."""
    doc = inspect.getdoc(documented) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _name_of(executor: Any) -> str:
    kind = type(executor)
    return f"{kind.__module__}.{kind.__qualname__}"
