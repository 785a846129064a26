"""Pipeline tools named by the catalog: at submit, the named pipeline's definition takes the name's place.

Owns `inline_catalog_pipelines(pipeline, lookup)`: the pipeline with the `pipeline` of every
`ai.agent` tool that names a catalog pipeline (a string, as `pipelines.list` shows it) replaced
by that pipeline's definition, inline tool pipelines walked too (a child that is an agent may
name catalog pipelines itself; a cycle is refused). The run keeps the definition it was
submitted with: a later catalog change does not change a running agent, and any process can
start the child without the catalog. An unknown name is refused (InvalidPipelineError, rule
`step_config`, naming the step, the tool and the known pipelines). Must not validate configs
otherwise (the step checks do) nor read the catalog itself (the caller's `lookup` does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from runtime_core.agents._executor import AGENT_STEP_KEY
from runtime_core.errors import InvalidPipelineError, NotFoundError
from runtime_core.pipeline import PipelineDefinition, StepDefinition, parse_pipeline
from runtime_core.steps import STEP_CONFIG_RULE

PipelineLookup = Callable[[str], PipelineDefinition]
"""A catalog pipeline by name (NotFoundError, whose hint names the known ones, when unknown)."""


def inline_catalog_pipelines(pipeline: PipelineDefinition, lookup: PipelineLookup) -> PipelineDefinition:
    """`pipeline` with every agent tool's catalog name replaced by its definition."""
    return _inlined(pipeline, lookup, (pipeline.name,))


def _inlined(
    pipeline: PipelineDefinition, lookup: PipelineLookup, path: tuple[str, ...]
) -> PipelineDefinition:
    steps = tuple(_step(step, lookup, path) for step in pipeline.steps)
    if all(new is old for new, old in zip(steps, pipeline.steps, strict=True)):
        return pipeline
    return pipeline.model_copy(update={"steps": steps})


def _step(step: StepDefinition, lookup: PipelineLookup, path: tuple[str, ...]) -> StepDefinition:
    tools = step.config.get("tools")
    if step.step_key != AGENT_STEP_KEY or not isinstance(tools, list):
        return step
    inlined = [_tool(step, tool, lookup, path) for tool in tools]
    if all(new is old for new, old in zip(inlined, tools, strict=True)):
        return step
    return step.model_copy(update={"config": {**step.config, "tools": inlined}})


def _tool(step: StepDefinition, tool: Any, lookup: PipelineLookup, path: tuple[str, ...]) -> Any:
    if not isinstance(tool, dict):
        return tool
    named = tool.get("pipeline")
    what = f"Step '{step.name}' ({step.step_key}): tool {tool.get('name')!r}"
    if isinstance(named, dict):
        try:
            child = parse_pipeline(named)
        except InvalidPipelineError:
            return tool  # the step's config check reports it
        inlined = _inlined(child, lookup, (*path, child.name))
        return tool if inlined is child else {**tool, "pipeline": _definition(inlined)}
    if not isinstance(named, str):
        return tool
    if named in path:
        raise InvalidPipelineError(
            STEP_CONFIG_RULE,
            f"{what} names pipeline '{named}', which contains this agent: "
            f"{' -> '.join((*path, named))} would never end.",
            hint="A pipeline tool may not run a pipeline it is part of.",
        )
    try:
        found = lookup(named)
    except NotFoundError as unknown:
        raise InvalidPipelineError(
            STEP_CONFIG_RULE,
            f"{what} names pipeline '{named}', which is not in the catalog.",
            hint=unknown.hint,
        ) from None
    return {**tool, "pipeline": _definition(_inlined(found, lookup, (*path, named)))}


def _definition(pipeline: PipelineDefinition) -> dict[str, Any]:
    """The pipeline as JSON data, as a tool's inline `pipeline` holds it."""
    return json.loads(pipeline.to_json())
