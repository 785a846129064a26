"""Tools `pipelines.list` and `pipelines.validate`: the pipeline catalog and validation rules.

Owns shaping catalog entries and validation outcomes into tool answers. Must not run or
store pipelines, nor validate them itself: the validator passed in is the engine's
`DagEngine.validate`, the same check submit and execution creation make, followed by
`DagEngine.check_for_tenant` for the caller's tenant (what submit checks too), once the catalog
pipelines an agent's tools name are put in their place (as submit does).
"""

from __future__ import annotations

from typing import Any

from mcp_runtime._inputs import PipelinesListInput, PipelinesValidateInput
from mcp_runtime._outputs import (
    PipelinesListOutput,
    PipelineSummary,
    PipelinesValidateOutput,
    ValidationProblem,
)
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.agents import inline_catalog_pipelines
from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import PipelineCatalog, PipelineDefinition, parse_pipeline
from runtime_core.queueing import PipelineValidator, TenantPipelineCheck

PIPELINE_RESOURCE_PREFIX = "pipeline://"


def pipeline_resource_uri(name: str) -> str:
    return f"{PIPELINE_RESOURCE_PREFIX}{name}"


def summarize(pipeline: PipelineDefinition) -> PipelineSummary:
    return PipelineSummary(
        name=pipeline.name,
        version=pipeline.version,
        description=pipeline.description,
        step_count=len(pipeline.steps),
        step_keys=sorted({step.step_key for step in pipeline.steps}),
        resource_uri=pipeline_resource_uri(pipeline.name),
    )


class PipelineTools:
    def __init__(
        self,
        catalog: PipelineCatalog,
        validate: PipelineValidator,
        check_for_tenant: TenantPipelineCheck | None = None,
    ) -> None:
        self._catalog = catalog
        self._validate = validate
        self._check_for_tenant = check_for_tenant

    async def list(self, request: PipelinesListInput, call: ToolCall) -> PipelinesListOutput:
        return PipelinesListOutput(pipelines=[summarize(pipeline) for pipeline in self._catalog.all()])

    async def validate(self, request: PipelinesValidateInput, call: ToolCall) -> PipelinesValidateOutput:
        source: Any = self._catalog.get(request.pipeline) if request.pipeline else request.definition
        try:
            pipeline = source if isinstance(source, PipelineDefinition) else parse_pipeline(source)
            pipeline = inline_catalog_pipelines(pipeline, self._catalog.get)  # as `submit` does
            self._validate(pipeline)
            if self._check_for_tenant is not None:
                await self._check_for_tenant(pipeline, call.snapshot)
        except InvalidPipelineError as exc:
            problem = ValidationProblem(rule=exc.rule, message=exc.message, hint=exc.hint)
            return PipelinesValidateOutput(valid=False, problem=problem)
        return PipelinesValidateOutput(
            valid=True, name=pipeline.name, version=pipeline.version, step_count=len(pipeline.steps)
        )

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="pipelines.list",
                title="List pipelines",
                description=(
                    "List the pipelines in the server's catalog (name, version, description, step count, "
                    "step types). Pass a name to `submit` as `pipeline`, or read its full JSON definition "
                    "from the MCP resource `pipeline://<name>`."
                ),
                input_model=PipelinesListInput,
                output_model=PipelinesListOutput,
                handler=self.list,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                name="pipelines.validate",
                title="Validate a pipeline",
                description=(
                    "Check a pipeline definition without running it: JSON shape, unique step names, "
                    "dependencies exist, no cycle, every stepKey registered, bindings well formed "
                    "('state.<field>' or 'steps.<name>.result[.<path>]'), and every config.retry, "
                    "config.concurrency and config.retention parses and names registered policies "
                    "(the same checks `submit` makes). Answers valid=true, or "
                    "valid=false with the first broken rule and how to fix it. Changes nothing."
                ),
                input_model=PipelinesValidateInput,
                output_model=PipelinesValidateOutput,
                handler=self.validate,
                read_only=True,
                idempotent=True,
            ),
        ]
