"""The `ai.agent` executor: a tool-calling agent on a configured LLM provider, resumable after a crash.

Owns the step type: its config model, the submit-time checks (the provider is configured,
each tool's step type is registered and its config checked as that step type's config is,
each pipeline tool's pipeline passes the engine's checks; for the submitting tenant, each
MCP tool on one of its own servers and each pipeline tool's steps), the human input it waits
for (an approval of a tool call, or a decision on an uncertain call of a tool it runs), and
starting one `AgentRun` per attempt with the rendered task. Must not run the loop itself
(`_loop` does) and runs only inside the engine, whose claim fences its checkpoints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from runtime_core.agents._config import AgentConfig, AgentTool
from runtime_core.agents._loop import AgentRun
from runtime_core.agents._tools import ChildRuns, ToolRunner
from runtime_core.dag import DagStore
from runtime_core.errors import InvalidPipelineError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition, StepDefinition
from runtime_core.policy import PROVIDER_RETRY
from runtime_core.steps import (
    ExecutorRegistry,
    HumanApprovalExecutor,
    StepConfigError,
    StepFailure,
    StepInvocation,
    check_prompt_provider,
    check_step_config,
    check_steps_for_tenant,
    parse_config,
    render_template,
)
from runtime_core.steps.llm import ChatMessage, LlmProviders
from runtime_core.steps.operations import DECISION_INPUT_SCHEMA

AGENT_STEP_KEY = "ai.agent"
UNCERTAIN_SUFFIX = ".uncertain"
APPROVAL_INPUT_SCHEMA = HumanApprovalExecutor.input_schema
TOOL_CHECK_TIMEOUT_S = 10.0


class AiAgentExecutor:
    step_key = AGENT_STEP_KEY
    config_model = AgentConfig
    description = (
        "A tool-calling agent: the model calls tools (step types, MCP servers' tools, pipelines) in a loop "
        "until it answers; every model turn and tool call is a durable checkpoint."
    )
    default_retry = PROVIDER_RETRY
    input_schema = APPROVAL_INPUT_SCHEMA

    def __init__(
        self,
        providers: LlmProviders,
        store: DagStore,
        executors: ExecutorRegistry,
        child_runs: ChildRuns | None = None,
        validate_pipeline: Callable[[PipelineDefinition], None] | None = None,
    ) -> None:
        """`validate_pipeline`: the engine's checks of a whole pipeline, run at submit on each
        pipeline tool's (a child run's pipeline is refused with its parent, not when called)."""
        self._providers = providers
        self._store = store
        self._executors = executors
        self._tools = ToolRunner(executors, child_runs)
        self._validate_pipeline = validate_pipeline

    def input_schema_for(self, waiting_key: str | None) -> dict[str, Any]:
        """An approval (`approved`, `comment`), or a decision when a tool's call is uncertain."""
        if waiting_key and waiting_key.endswith(UNCERTAIN_SUFFIX):
            return dict(DECISION_INPUT_SCHEMA)
        return dict(APPROVAL_INPUT_SCHEMA)

    def check_config(self, config: AgentConfig) -> None:
        """Submit-time: the provider is configured here, each tool's step type is registered and
        its config checked exactly as that step type's config is in a pipeline (unknown keys,
        values, the step type's own `check_config`), and each pipeline tool's pipeline is a
        definition (a catalog name was replaced at submit) that passes the engine's checks."""
        check_prompt_provider(config, self._providers)
        for tool in config.tools:
            if tool.step_key is None:
                self._check_pipeline_tool(tool)
                continue
            if tool.step_key not in self._executors:
                raise StepConfigError(
                    f"tool {tool.name!r} names step type {tool.step_key!r}, which is not registered",
                    hint="Registered: " + ", ".join(self._executors.keys()),
                )
            check_step_config(
                self._executors, tool.step_key, tool.config, f"tool {tool.name!r} ({tool.step_key})"
            )

    def _check_pipeline_tool(self, tool: AgentTool) -> None:
        pipeline = tool.definition()
        if self._validate_pipeline is None:
            return
        try:
            self._validate_pipeline(pipeline)
        except InvalidPipelineError as error:
            raise StepConfigError(
                f"tool {tool.name!r}: its pipeline {pipeline.name!r} is invalid: {error.message}",
                hint=error.hint,
                rule=error.rule,
            ) from None

    async def check_for_tenant(
        self, config: AgentConfig, step: StepDefinition, snapshot: ExecutionContextSnapshot
    ) -> None:
        """Submit-time, for the submitting tenant: each tool a step type describes (`mcp.tool`: one
        of the tenant's own servers, an allowed tool) and each pipeline tool's own steps. A server
        that does not answer now is checked when the tool is called instead."""
        for tool in config.tools:
            if tool.pipeline is not None:
                try:
                    await check_steps_for_tenant(tool.definition().steps, self._executors, snapshot)
                except InvalidPipelineError as error:
                    raise StepConfigError(f"tool {tool.name!r}: {error.message}", hint=error.hint) from None
                continue
            describe = getattr(self._executors.get(tool.step_key or ""), "describe_tool", None)
            if describe is None:
                continue
            try:
                await asyncio.wait_for(describe(tool.config, snapshot), TOOL_CHECK_TIMEOUT_S)
            except StepFailure as failure:
                if failure.code in ("permanent", "not_found"):
                    raise StepConfigError(f"tool {tool.name!r}: {failure.message}") from None
            except TimeoutError:
                continue

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(AgentConfig, invocation)
        if invocation.claim is None:
            raise StepFailure(
                f"step {invocation.step_name!r} ({AGENT_STEP_KEY}) runs only inside the engine: its "
                "checkpoints are fenced by the step's claim",
                code="permanent",
            )
        provider = self._providers.resolve(config.provider)
        task = render_template(config.prompt, invocation.inputs)
        system = render_template(config.system, invocation.inputs) if config.system else None
        run = AgentRun(
            invocation,
            config,
            provider,
            self._store,
            self._tools,
            [ChatMessage(role="user", text=task)],
            system,
        )
        return await run.run()
