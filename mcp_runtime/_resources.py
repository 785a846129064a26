"""MCP resources and prompts: pipeline definitions (`pipeline://{name}`), step types
(`step://{step_key}`) and `run_pipeline`.

Owns the resources that serve catalog pipelines and the registered step types (description,
source and config JSON Schema) as JSON (RBAC-checked like the `pipelines.*` tools), argument
completion for pipeline names, and the prompt explaining how to run a pipeline end to end.
Must not run anything.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from mcp_runtime._guard import AuthenticationRequiredError, ToolGuard
from mcp_runtime._permissions import Permission
from mcp_runtime._pipeline_tools import pipeline_resource_uri
from mcp_runtime._rbac import PermissionDeniedError
from mcp_runtime._step_tools import StepDescriber, no_steps
from runtime_core.errors import NotFoundError
from runtime_core.pipeline import PipelineCatalog, PipelineDefinition, effective_step_inputs, parse_binding

DEFAULT_PROMPT_PIPELINE = "rag-final-test"


def state_fields(pipeline: PipelineDefinition) -> list[str]:
    """The `state.<field>` names a pipeline's bindings read: what `submit`'s `input` must hold."""
    fields = {
        parse_binding(value).path[0]
        for step in pipeline.steps
        for value in effective_step_inputs(step).values()
        if isinstance(value, str) and value.startswith("state.")
    }
    return sorted(fields)


def run_pipeline_text(pipeline: PipelineDefinition) -> str:
    fields = ", ".join(f"'{field}'" for field in state_fields(pipeline)) or "none"
    return f"""Run the pipeline '{pipeline.name}' (version {pipeline.version}) on the mcp-runtime server.
{pipeline.description}

Its steps: {", ".join(f"{step.name} ({step.step_key})" for step in pipeline.steps)}.
Initial state fields its bindings read: {fields}.

1. Optionally call `pipelines.validate` with {{"pipeline": "{pipeline.name}"}}; the full definition is
   the resource {pipeline_resource_uri(pipeline.name)}.
2. Call `submit` with {{"pipeline": "{pipeline.name}", "input": {{...the state fields...}}}}. It returns a
   shared_run_id (srun_...). Mode QueueFirst (default) only queues the run.
3. Call `queue.drain` (e.g. {{"max_count": 10}}) so the queued run is dispatched to a runtime
   instance (skip this if the server runs its background pump).
4. Poll `run.status` with {{"run_id": "<shared_run_id>"}} until done=true; it shows the
   local run, the execution id, the step table and, once Completed, the result.
   If control_status is WaitingForInput, answer with `input.submit` (execution_id, waiting_key,
   payload); `pause` / `resume` / `cancel` control a running execution.
5. Read what happened with `ledger` and `trace` (same run_id); `forensics` lists recovery actions.

Every tool answers errors as text starting with a [code] and saying what to do next."""


def _authorize_read(guard: ToolGuard, ctx: Context) -> None:
    try:
        guard.authorize(Permission.PIPELINE_READ, ctx)
    except (AuthenticationRequiredError, PermissionDeniedError) as exc:
        raise ResourceError(str(exc)) from exc


def register_step_resources(server: MCPServer, describe_steps: StepDescriber, guard: ToolGuard) -> None:
    @server.resource(
        "step://{step_key}",
        name="step",
        title="Step type",
        description="One step type: its description, source and the JSON Schema of its `config`.",
        mime_type="application/json",
    )
    async def step_type(step_key: str, ctx: Context) -> str:
        _authorize_read(guard, ctx)
        try:
            [described] = describe_steps(step_key)
        except NotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        return json.dumps(described.model_dump(mode="json"), indent=2)


def register_resources(
    server: MCPServer,
    catalog: PipelineCatalog,
    guard: ToolGuard,
    describe_steps: StepDescriber = no_steps,
) -> None:
    register_step_resources(server, describe_steps, guard)

    @server.resource(
        "pipeline://{name}",
        name="pipeline",
        title="Pipeline definition",
        description="The JSON definition of a catalog pipeline (see the `pipelines.list` tool for names).",
        mime_type="application/json",
    )
    async def pipeline_definition(name: str, ctx: Context) -> str:
        _authorize_read(guard, ctx)
        try:
            pipeline = catalog.get(name)
        except NotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        return json.dumps(pipeline.model_dump(mode="json", by_alias=True), indent=2)

    @server.prompt(
        name="run_pipeline",
        title="Run a pipeline",
        description="Step-by-step instructions to submit a catalog pipeline, drain the queue, follow it "
        "to completion and read its ledger.",
    )
    def run_pipeline(pipeline: str = DEFAULT_PROMPT_PIPELINE) -> str:
        return run_pipeline_text(catalog.get(pipeline))

    @server.completion()
    async def complete_pipeline_names(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        if argument.name not in ("name", "pipeline"):
            return None
        names = [name for name in catalog.names() if name.startswith(argument.value)]
        return Completion(values=names, total=len(names), has_more=False)
