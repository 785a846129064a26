"""The `ai.agent` step config: the model, the task, the tools, the limits and the prices.

Owns the config fields (camelCase in pipeline JSON) and their validation: each tool names
exactly one of a registered step type (`stepKey` with its `config`; `mcp.tool` tools are
step types too) or a child pipeline (`pipeline`: a definition, or a catalog name the submit
replaces), tool names are unique, `params` may not
replace what the provider sets, a cost budget needs prices. Must not call a provider or run
a tool.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.steps import STEP_CONFIG_RULE, StepConfig, StepConfigError, model_call_policy
from runtime_core.steps.llm import (
    ANTHROPIC_RESERVED_PARAMS,
    OPENAI_RESERVED_PARAMS,
    TEMPLATE_PROVIDER,
    ToolSpec,
)
from runtime_core.steps.operations import UncertaintyPolicy

DEFAULT_MAX_TURNS = 10
ANY_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


class AgentTool(StepConfig):
    """One tool the model may call. `inputSchema` (JSON schema of the arguments) is what the model
    sees; the arguments become the step's inputs (a step type) or the child run's input (a
    pipeline: an inline definition, or the name of a catalog pipeline, which the submit replaces
    by its definition; run as a child run of the agent's tenant).
    `requiresApproval`: a human approves each call before it runs (input.submit under the
    waiting key the run shows), refusing skips it and tells the model."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    step_key: str | None = None
    config: dict[str, Any] = {}
    pipeline: dict[str, Any] | str | None = None
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(ANY_ARGUMENTS))
    requires_approval: bool = False

    @field_validator("pipeline")
    @classmethod
    def _valid_pipeline(cls, pipeline: dict[str, Any] | str | None) -> dict[str, Any] | str | None:
        if isinstance(pipeline, str) and not pipeline.strip():
            raise ValueError("a pipeline name may not be empty")
        if isinstance(pipeline, dict):
            try:
                parse_pipeline(pipeline)
            except InvalidPipelineError as error:
                raise ValueError(f"its pipeline is invalid: {error.message}") from None
        return pipeline

    def definition(self) -> PipelineDefinition:
        """The tool's pipeline; StepConfigError when it is a catalog name nothing replaced (a
        submit path without the catalog)."""
        if isinstance(self.pipeline, str):
            raise StepConfigError(
                f"tool {self.name!r} names catalog pipeline {self.pipeline!r}, which this submit did not "
                "replace by its definition",
                hint="Submit through the MCP server (`submit`, `schedules.create` and `pipelines.validate` "
                "resolve catalog names; see `pipelines.list`), or give the pipeline's definition inline.",
                rule=STEP_CONFIG_RULE,
            )
        assert self.pipeline is not None
        return parse_pipeline(self.pipeline)

    @model_validator(mode="after")
    def _one_kind(self) -> AgentTool:
        if (self.step_key is None) == (self.pipeline is None):
            raise ValueError(f"tool {self.name!r} must name exactly one of stepKey or pipeline")
        return self

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, input_schema=self.input_schema)


class AgentLimits(StepConfig):
    """Per step: model turns, total tokens, cost (USD, from `pricing`) and wall time (from the
    agent's first checkpoint, across crashes and retries). Exceeding one fails the step with
    `turn_limit`, `token_limit`, `cost_limit` or `time_limit` (never retried)."""

    max_turns: int = Field(default=DEFAULT_MAX_TURNS, ge=1, le=1000)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_time_ms: int | None = Field(default=None, ge=1)


class Pricing(StepConfig):
    """USD per million tokens, for the cost budget and the cost the result reports."""

    input_per_million_tokens: float = Field(ge=0)
    output_per_million_tokens: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (
            input_tokens * self.input_per_million_tokens + output_tokens * self.output_per_million_tokens
        ) / 1_000_000


class AgentConfig(StepConfig):
    """`prompt` (a template over the inputs, like `ai.prompt`'s) is the task; `system` the
    instructions. `stream`: each model turn's text is visible while it is written.
    `modelOnUncertain`: what settles a model call whose process died before its reply was
    recorded (default `retry`: a model call has no side effect but its cost)."""

    prompt: str
    provider: str = TEMPLATE_PROVIDER
    model: str | None = None
    system: str | None = None
    params: dict[str, Any] = {}
    tools: list[AgentTool] = []
    limits: AgentLimits = AgentLimits()
    pricing: Pricing | None = None
    stream: bool = False
    model_on_uncertain: UncertaintyPolicy = UncertaintyPolicy.RETRY

    _model_call_policy = field_validator("model_on_uncertain")(model_call_policy)

    @field_validator("params")
    @classmethod
    def _no_reserved_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted((OPENAI_RESERVED_PARAMS | ANTHROPIC_RESERVED_PARAMS) & set(params))
        if reserved:
            raise ValueError(f"params may not set {', '.join(reserved)}: the provider sets them")
        return params

    @field_validator("tools")
    @classmethod
    def _unique_names(cls, tools: list[AgentTool]) -> list[AgentTool]:
        names = [tool.name for tool in tools]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"tool names must be unique: {', '.join(repeated)}")
        return tools

    @model_validator(mode="after")
    def _budget_needs_prices(self) -> AgentConfig:
        if self.limits.max_cost_usd is not None and self.pricing is None:
            raise ValueError("limits.maxCostUsd needs pricing (USD per million input and output tokens)")
        return self

    def tool(self, name: str) -> AgentTool | None:
        return next((tool for tool in self.tools if tool.name == name), None)
