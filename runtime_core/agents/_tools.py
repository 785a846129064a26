"""Running one tool call of an agent: a registered step type, or a child pipeline.

Owns turning the model's call into a nested invocation of the tool's step type (the model's
arguments are its inputs, the tool's `config` its config; its operations are the agent
step's own, named `tool-<seq>.<name>`, so a side effect the tool guards survives a crash of
the agent under the tool's uncertainty policy), handing a child pipeline to the
`ChildRuns` the runtime provides, the tool's spec for the model (a step type may describe
its tools, `mcp.tool` from the MCP server's listing), and the outcome the model reads: the
tool's data as JSON, or the failure a tool answered (permanent failures are told to the
model; any other failure fails the agent step, whose retry replays to this call). Must not record checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runtime_core.agents._config import AgentTool
from runtime_core.steps import ExecutorRegistry, StepFailure, StepInvocation, canonical_json, unwrap_result
from runtime_core.steps.llm import ToolCall, ToolSpec
from runtime_core.steps.operations import OperationJournal, OperationStart, OperationState, UncertaintyPolicy

TOLD_TO_MODEL = frozenset({"permanent", "not_found", "invalid_input", "resolver"})
"""Failure codes a tool answers definitively: the model reads them and may try otherwise."""
MAX_TOOL_TEXT = 32_000


@dataclass(frozen=True)
class ToolOutcome:
    text: str  # what the model reads
    is_error: bool
    data: Any = None
    child_run: dict[str, Any] | None = None  # a pipeline tool's run (ids), linked both ways

    def record(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"text": self.text, "isError": self.is_error}
        if self.child_run is not None:
            shown["childRun"] = self.child_run
        return shown


class ChildRuns(Protocol):
    """Starts a child pipeline's run for a tool call and waits for its result (the runtime's)."""

    async def run_child(
        self, parent: StepInvocation, tool: AgentTool, arguments: dict[str, Any], call_key: str
    ) -> tuple[Any, dict[str, Any]]:
        """The child run's result data and its identities; the same `call_key` never starts a
        second run. StepFailure when it fails."""
        ...


class ScopedOperations:
    """The agent step's operations journal seen by one tool call: its names get the call's prefix."""

    def __init__(self, journal: OperationJournal, prefix: str) -> None:
        self._journal = journal
        self._prefix = prefix

    async def begin(self, name: str, *, policy: UncertaintyPolicy) -> OperationStart:
        start = await self._journal.begin(f"{self._prefix}.{name}", policy=policy)
        return start.model_copy(update={"name": name})  # settled through this scope again

    async def settle(
        self, name: str, state: OperationState, settled_by: str, *, consume_input: bool = False
    ) -> None:
        await self._journal.settle(f"{self._prefix}.{name}", state, settled_by, consume_input=consume_input)


class ToolRunner:
    def __init__(self, executors: ExecutorRegistry, child_runs: ChildRuns | None = None) -> None:
        self.executors = executors
        self.child_runs = child_runs

    async def spec(self, tool: AgentTool, invocation: StepInvocation) -> ToolSpec:
        """The tool as the model sees it: its declared description and `inputSchema`; a step type
        that describes its tools (`mcp.tool`: the MCP tool's own) fills what is not declared."""
        spec = tool.spec()
        executor = self.executors.get(tool.step_key) if tool.step_key else None
        describe = getattr(executor, "describe_tool", None)
        if describe is None or {"description", "input_schema"} <= tool.model_fields_set:
            return spec
        description, schema = await describe(tool.config, invocation.snapshot)
        return ToolSpec(
            name=tool.name,
            description=tool.description if "description" in tool.model_fields_set else description,
            input_schema=tool.input_schema if "input_schema" in tool.model_fields_set else schema,
        )

    async def run(
        self, invocation: StepInvocation, tool: AgentTool, call: ToolCall, seq: int, human_input: Any
    ) -> ToolOutcome:
        try:
            if tool.pipeline is not None:
                return await self._child(invocation, tool, call, seq)
            return await self._step(invocation, tool, call, seq, human_input)
        except StepFailure as failure:
            if failure.code not in TOLD_TO_MODEL:
                raise
            return ToolOutcome(text=f"[{failure.code}] {failure.message}", is_error=True)

    async def _step(
        self, invocation: StepInvocation, tool: AgentTool, call: ToolCall, seq: int, human_input: Any
    ) -> ToolOutcome:
        assert tool.step_key is not None
        executor = self.executors.get(tool.step_key)
        if executor is None:
            raise StepFailure(
                f"tool {tool.name!r}: no step type {tool.step_key!r} is registered", code="permanent"
            )
        operations = invocation.operations
        nested = invocation.model_copy(
            update={
                "step_key": tool.step_key,
                "config": tool.config,
                "inputs": dict(call.arguments),
                "human_input": human_input,
                "operations": None if operations is None else ScopedOperations(operations, f"tool-{seq}"),
                "claim": None,
            }
        )
        result = await executor.execute(nested)
        data = unwrap_result(result)
        return ToolOutcome(text=_text(data), is_error=False, data=data)

    async def _child(
        self, invocation: StepInvocation, tool: AgentTool, call: ToolCall, seq: int
    ) -> ToolOutcome:
        if self.child_runs is None:
            raise StepFailure(
                f"tool {tool.name!r} runs pipeline {tool.pipeline!r}, but this process cannot start "
                "child runs",
                code="permanent",
            )
        call_key = f"{invocation.execution_id}:{invocation.step_name}:{seq}"
        data, run = await self.child_runs.run_child(invocation, tool, dict(call.arguments), call_key)
        return ToolOutcome(text=_text(data), is_error=False, data=data, child_run=run)


def _text(data: Any) -> str:
    text = data if isinstance(data, str) else canonical_json(data)
    return text if len(text) <= MAX_TOOL_TEXT else f"{text[:MAX_TOOL_TEXT]}... [truncated]"
