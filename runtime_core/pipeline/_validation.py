"""Pipeline validation: each rule raises InvalidPipelineError naming the rule; a pipeline
above the process's step limit (`pipeline_limits`) is an InputTooLargeError. No check walks
the graph once per step.

Must not import `runtime_core.retention` (it imports this package): the `config.retention`
rule runs the check its caller passes in, the retention engine's own `validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from runtime_core.errors import InputTooLargeError, InvalidPipelineError
from runtime_core.flow import PipelineFlow
from runtime_core.pipeline._bindings import BindingError, effective_step_inputs, is_binding, parse_binding
from runtime_core.pipeline._limits import MAX_STEPS_ENV, pipeline_limits
from runtime_core.pipeline._models import PipelineDefinition, StepDefinition

RetentionCheck = Callable[[dict[str, Any]], object]
"""Parses a pipeline `config`'s retention section or raises InvalidPipelineError."""


def validate_pipeline(
    pipeline: PipelineDefinition,
    registered_step_keys: Iterable[str],
    *,
    check_retention: RetentionCheck | None = None,
) -> None:
    if not pipeline.name.strip():
        raise InvalidPipelineError("name_present", "Pipeline name is missing.", hint="Add a 'name'.")
    if pipeline.execution_mode != "Dag":
        raise InvalidPipelineError(
            "execution_mode", f"executionMode '{pipeline.execution_mode}' is not supported; use 'Dag'."
        )
    if not pipeline.steps:
        raise InvalidPipelineError("steps_present", "Pipeline has no steps.", hint="Add at least one step.")
    max_steps = pipeline_limits().max_steps
    if len(pipeline.steps) > max_steps:
        raise InputTooLargeError(
            f"Pipeline has {len(pipeline.steps)} steps; the limit is {max_steps}. Nothing was stored.",
            hint=f"Split the work into several pipelines, or raise {MAX_STEPS_ENV} on every process.",
        )
    _check_names(pipeline)
    _check_dependencies(pipeline)
    _check_no_cycle(pipeline)
    _check_step_keys(pipeline, set(registered_step_keys))
    _check_bindings(pipeline)
    _check_flow(pipeline)
    if check_retention is not None:
        _check_retention(pipeline, check_retention)


def _check_flow(pipeline: PipelineDefinition) -> None:
    """`config.flow` (concurrency key, run rate limits) parses: docs/flow-control.md."""
    try:
        PipelineFlow.of_config(pipeline.config)
    except ValueError as exc:
        raise InvalidPipelineError(
            "flow_valid", str(exc), hint="See docs/flow-control.md for the config.flow fields."
        ) from None


def _check_names(pipeline: PipelineDefinition) -> None:
    seen: set[str] = set()
    for index, step in enumerate(pipeline.steps):
        if not step.name.strip():
            raise InvalidPipelineError("step_name_present", f"Step #{index + 1} has no name.")
        if step.name in seen:
            raise InvalidPipelineError(
                "step_names_unique",
                f"Step name '{step.name}' is used more than once.",
                hint="Give every step a unique name.",
            )
        seen.add(step.name)


def _check_dependencies(pipeline: PipelineDefinition) -> None:
    names = {step.name for step in pipeline.steps}
    for step in pipeline.steps:
        for dep in step.depends_on:
            if dep not in names:
                raise InvalidPipelineError(
                    "dependencies_exist", f"Step '{step.name}' depends on unknown step '{dep}'."
                )
            if dep == step.name:
                raise InvalidPipelineError(
                    "no_cycle", f"Step '{step.name}' depends on itself: {dep} -> {dep}."
                )


def _check_no_cycle(pipeline: PipelineDefinition) -> None:
    deps = {step.name: list(step.depends_on) for step in pipeline.steps}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in deps:
        if state.get(root):
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                state[node] = 1
                path.append(node)
            if index < len(deps[node]):
                stack.append((node, index + 1))
                nxt = deps[node][index]
                if state.get(nxt) == 1:
                    cycle = [*path[path.index(nxt) :], nxt]
                    raise InvalidPipelineError(
                        "no_cycle",
                        "Dependency cycle: " + " -> ".join(cycle) + ".",
                        hint="Remove one of these dependsOn edges.",
                    )
                if not state.get(nxt):
                    stack.append((nxt, 0))
            else:
                state[node] = 2
                path.pop()


def _check_step_keys(pipeline: PipelineDefinition, registered: set[str]) -> None:
    for step in pipeline.steps:
        if step.step_key not in registered:
            raise InvalidPipelineError(
                "step_keys_registered",
                f"Step '{step.name}' uses unregistered stepKey '{step.step_key}'.",
                hint="Registered step keys: " + ", ".join(sorted(registered)),
            )


def _ancestor_masks(pipeline: PipelineDefinition) -> tuple[dict[str, int], dict[str, int]]:
    """Each step's bit, and the bitmask of its transitive dependencies, in one pass in dependency
    order: a 10,000-step chain costs 10,000 big-int ORs, not 50 million set insertions."""
    bits = {step.name: 1 << index for index, step in enumerate(pipeline.steps)}
    deps = {step.name: set(step.depends_on) for step in pipeline.steps}
    dependents: dict[str, list[str]] = {name: [] for name in deps}
    for name, names in deps.items():
        for dep in names:
            dependents[dep].append(name)
    waiting = {name: len(names) for name, names in deps.items()}
    ready = [name for name, count in waiting.items() if count == 0]
    masks: dict[str, int] = {}
    while ready:
        node = ready.pop()
        masks[node] = 0
        for dep in deps[node]:
            masks[node] |= masks[dep] | bits[dep]
        for dependent in dependents[node]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    return bits, masks


def _check_source_steps(step: StepDefinition) -> None:
    sources, source = step.config.get("sourceSteps"), step.config.get("sourceStep")
    if sources is not None and not (
        isinstance(sources, list) and all(isinstance(name, str) for name in sources)
    ):
        raise InvalidPipelineError(
            "bindings_parse", f"Step '{step.name}' config.sourceSteps must be a list of step names."
        )
    if source is not None and not isinstance(source, str):
        raise InvalidPipelineError(
            "bindings_parse", f"Step '{step.name}' config.sourceStep must be a step name."
        )


def _check_bindings(pipeline: PipelineDefinition) -> None:
    ancestry: tuple[dict[str, int], dict[str, int]] | None = None
    for step in pipeline.steps:
        _check_source_steps(step)
        for field, value in effective_step_inputs(step).items():
            if not is_binding(value):
                continue
            try:
                binding = parse_binding(value)
            except BindingError as exc:
                raise InvalidPipelineError(
                    "bindings_parse", f"Step '{step.name}' input '{field}': {exc.message}"
                ) from exc
            if binding.step is None:
                continue
            ancestry = ancestry or _ancestor_masks(pipeline)
            bits, masks = ancestry
            if not masks[step.name] & bits.get(binding.step, 0):
                raise InvalidPipelineError(
                    "bindings_parse",
                    f"Step '{step.name}' input '{field}' reads step '{binding.step}', "
                    "which is not one of its (transitive) dependencies.",
                    hint=f"Add '{binding.step}' to dependsOn of '{step.name}'.",
                )


def _check_retention(pipeline: PipelineDefinition, check_retention: RetentionCheck) -> None:
    """Reject at submit what the retention pass would otherwise only log and skip at run time."""
    try:
        check_retention(pipeline.config)
    except InvalidPipelineError as exc:
        raise InvalidPipelineError("retention_valid", exc.message, hint=exc.hint) from exc
