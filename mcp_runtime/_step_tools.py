"""Tool `steps.list`: the registered step types (built-in and plug-in) and their config schemas,
and the tools of the caller's tenant's MCP servers that `mcp.tool` steps may call.

Owns shaping step descriptions and MCP server listings into the tool answer. Must not register
or load steps: the descriptions come from the running engine's executor registry, the listings
from its MCP servers (only the caller's tenant's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp_runtime._inputs import StepsListInput
from mcp_runtime._registration import ToolCall, ToolSpec
from mcp_runtime._step_outputs import McpServerInfo, StepsListOutput, StepTypeInfo
from runtime_core.steps import McpServers, StepDescription

MCP_TOOL_STEP = "mcp.tool"

StepDescriber = Callable[[str | None], list[StepDescription]]
"""The registered step types' descriptions, or one's (NotFoundError when unknown)."""


def no_steps(step_key: str | None = None) -> list[StepDescription]:
    """The describer of a backend built without a runtime (schema snapshots): no step types."""
    return []


class StepTools:
    def __init__(self, describe_steps: StepDescriber, mcp_servers: McpServers | None = None) -> None:
        self._describe_steps = describe_steps
        self._mcp_servers = mcp_servers

    async def list(self, request: StepsListInput, call: ToolCall) -> StepsListOutput:
        described = self._describe_steps(request.step_key)
        servers: list[McpServerInfo] = []
        if self._mcp_servers is not None and request.step_key in (None, MCP_TOOL_STEP):
            listings = await self._mcp_servers.listing(call.snapshot.tenant_id)
            servers = [McpServerInfo.model_validate(listing.model_dump()) for listing in listings]
        return StepsListOutput(
            steps=[StepTypeInfo.model_validate(d.model_dump()) for d in described], mcp_servers=servers
        )

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="steps.list",
                title="List step types",
                description=(
                    "List the step types this server runs (built-in and plug-in): stepKey, where it comes "
                    "from, what it does, the JSON Schema of its `config` (submit and pipelines.validate "
                    "refuse a step whose config does not fit it, naming the field) and, for steps that "
                    "wait for a human, the schema of the input they expect. `mcp_servers` lists your "
                    "tenant's MCP servers and the tools a `mcp.tool` step may call, with their input "
                    "schemas."
                ),
                input_model=StepsListInput,
                output_model=StepsListOutput,
                handler=self.list,
                read_only=True,
                idempotent=True,
            )
        ]
