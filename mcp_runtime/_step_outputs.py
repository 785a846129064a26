"""The answer of `steps.list`: step types, and the caller's tenant's MCP servers and their tools.

Owns the output models of that one tool (kept apart from `_outputs`, the other tools' answers).
Must not hold behaviour.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mcp_runtime._outputs import ToolOutput


class StepTypeInfo(ToolOutput):
    step_key: str = Field(description="The `stepKey` pipelines use.")
    source: str = Field(description="builtin, or the plug-in entry point / module:attr reference.")
    description: str
    config_schema: dict[str, Any] = Field(
        description="JSON Schema of its `config` (camelCase), checked at submit and pipelines.validate."
    )
    input_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema of the human input the step waits for (input.submit), if any."
    )
    default_retry: dict[str, Any] | None = Field(
        None,
        description="The `retry` section a step of this type uses when its config has none "
        "(null: no retries); any `retry` section replaces it.",
    )


class McpToolInfo(ToolOutput):
    server: str
    tool: str = Field(description="The `tool` of a `mcp.tool` step's config.")
    title: str | None = None
    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=dict, description="JSON Schema of the tool's arguments (the step's `input`)."
    )
    read_only: bool | None = Field(None, description="The server's readOnlyHint, if it gave one.")
    idempotent: bool | None = Field(None, description="The server's idempotentHint, if it gave one.")


class McpServerInfo(ToolOutput):
    server: str = Field(description="The `server` of a `mcp.tool` step's config.")
    transport: str = Field(description="http or stdio.")
    tools: list[McpToolInfo] = Field(default_factory=list, description="Tools your runs may call.")
    error: str | None = Field(None, description="Why the tools could not be listed now, if so.")


class StepsListOutput(ToolOutput):
    steps: list[StepTypeInfo] = Field(description="Registered step types, by stepKey.")
    mcp_servers: list[McpServerInfo] = Field(
        default_factory=list, description="Your tenant's MCP servers and the tools `mcp.tool` steps may call."
    )
