"""Durable agents: `ai.agent`, a tool-calling loop whose every model turn and tool call is a checkpoint.

Owns the agent step type (config, submit-time checks), its loop over the configured LLM
providers (OpenAI tools and Anthropic tool use, streamed when asked), its tools (registered
step types, `mcp.tool` tools among them, and child pipelines, a catalog pipeline's name
replaced by its definition at submit), the journal of its sub-steps
in the execution's hot state (Lua transitions fenced by the step's claim: recovery resumes
an agent from its last checkpoint on the same ExecutionId without repeating a completed
model or tool call), its limits (turns, tokens, cost, wall time), approvals of tool calls by
a human (the step parks for input), its spans (OpenTelemetry GenAI conventions), and
cancelling its child runs with its own run. Must not coordinate steps (the DAG engine does)
nor speak a provider's wire format.
"""

from runtime_core.agents._catalog_tools import PipelineLookup, inline_catalog_pipelines
from runtime_core.agents._child_cancel import ChildCanceller, HotStateChildCanceller, PlaneChildCanceller
from runtime_core.agents._children import QueuedChildRuns
from runtime_core.agents._config import AgentConfig, AgentLimits, AgentTool, Pricing
from runtime_core.agents._executor import AGENT_STEP_KEY, AiAgentExecutor
from runtime_core.agents._journal import AgentJournal, SubStep, SubStepState, read_sub_steps
from runtime_core.agents._loop import approval_waiting_key
from runtime_core.agents._tools import ChildRuns, ToolOutcome

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # The step type
    "AiAgentExecutor",
    "AGENT_STEP_KEY",
    "AgentConfig",
    "AgentTool",
    "AgentLimits",
    "Pricing",
    "approval_waiting_key",
    # Checkpoints (sub-steps)
    "AgentJournal",
    "SubStep",
    "SubStepState",
    "read_sub_steps",
    # Child pipelines as tools
    "ChildRuns",
    "QueuedChildRuns",
    "ChildCanceller",
    "PlaneChildCanceller",
    "HotStateChildCanceller",
    "ToolOutcome",
    "inline_catalog_pipelines",
    "PipelineLookup",
]
