"""Input bindings: `state.<path>` and `steps.<name>.result[.<path>]`.

A string input value that starts with `state.` or `steps.` is a binding; anything else is a
literal. Steps naming `sourceSteps` / `sourceStep` in config read those results implicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from runtime_core.errors import RuntimeCoreError
from runtime_core.pipeline._models import StepDefinition


class BindingError(RuntimeCoreError):
    """A binding is malformed or its value cannot be found."""

    code = "binding_error"


@dataclass(frozen=True)
class Binding:
    source: Literal["state", "steps"]
    step: str | None
    path: tuple[str, ...]


def is_binding(value: Any) -> bool:
    return isinstance(value, str) and (value.startswith("state.") or value.startswith("steps."))


def parse_binding(expression: str) -> Binding:
    parts = expression.split(".")
    if any(part == "" for part in parts):
        raise BindingError(f"Binding '{expression}' has an empty segment.")
    if parts[0] == "state":
        if len(parts) < 2:
            raise BindingError(f"Binding '{expression}' must name a state field: state.<field>.")
        return Binding("state", None, tuple(parts[1:]))
    if parts[0] == "steps":
        if len(parts) < 3 or parts[2] != "result":
            raise BindingError(
                f"Binding '{expression}' must look like steps.<name>.result[.<path>].",
            )
        return Binding("steps", parts[1], tuple(parts[3:]))
    raise BindingError(f"Binding '{expression}' must start with 'state.' or 'steps.'.")


def effective_step_inputs(step: StepDefinition) -> dict[str, Any]:
    """Explicit inputs plus implicit `steps.<source>.result` for configured source steps."""
    inputs = dict(step.input)
    configured = step.config.get("sourceSteps")
    sources = list(configured) if isinstance(configured, list) else []
    if isinstance(step.config.get("sourceStep"), str):
        sources.append(step.config["sourceStep"])
    for source in sources:
        if isinstance(source, str) and source not in inputs:
            inputs[source] = f"steps.{source}.result"
    return inputs


def steps_read_by(step: StepDefinition) -> list[str]:
    """Names of the steps whose results this step's bindings read (sorted, unique)."""
    names = {
        parse_binding(value).step
        for value in effective_step_inputs(step).values()
        if is_binding(value) and value.startswith("steps.")
    }
    return sorted(name for name in names if name)


def _walk(value: Any, path: tuple[str, ...], expression: str) -> Any:
    for segment in path:
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            raise BindingError(f"Binding '{expression}' found nothing at '{segment}'.")
    return value


def resolve_inputs(step: StepDefinition, state: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """Resolve a step's inputs from the execution state and upstream results."""
    if not step.input and "sourceSteps" not in step.config and "sourceStep" not in step.config:
        return {}  # no inputs, explicit or implicit (once per step run: skip building them)
    resolved: dict[str, Any] = {}
    for name, value in effective_step_inputs(step).items():
        if not is_binding(value):
            resolved[name] = value
            continue
        binding = parse_binding(value)
        if binding.source == "state":
            resolved[name] = _walk(state, binding.path, value)
        else:
            if binding.step not in results:
                raise BindingError(f"Binding '{value}' reads step '{binding.step}' which has no result.")
            resolved[name] = _walk(results[binding.step], binding.path, value)
    return resolved
