"""The `mcp.tool` executor: call one tool of one of the run's tenant's MCP servers.

Owns the step config (`server`, `tool`, the uncertainty policy and the status tool that
`reconcile` asks), the submit-time check for the submitting tenant (the server is one of its
own; when the server answers, the tool is offered and the step's `input` fits its input
schema), and the call: the arguments are the step's resolved inputs (a bound step result
gives its data), checked against the input schema, sent with the step's operation id in
`_meta` through `guarded_call`; `structuredContent` is the step's data. Must not know the
wire protocol (the SDK's `mcp.Client` does) nor another tenant's servers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp.types import CallToolResult, Tool
from pydantic import Field, model_validator

from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import StepDefinition
from runtime_core.steps._config import StepConfig, StepConfigError, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._results import step_result, unwrap_result
from runtime_core.steps.mcp_tool._arguments import call_problems, submit_problems
from runtime_core.steps.mcp_tool._connection import McpConnection, SessionUnavailable
from runtime_core.steps.mcp_tool._failures import call_error, result_data, tool_error, unreachable
from runtime_core.steps.mcp_tool._servers import McpEntry, McpServers
from runtime_core.steps.operations import DECISION_INPUT_SCHEMA, UncertaintyPolicy, guarded_call

log = logging.getLogger("runtime_core.steps.mcp_tool")

PROVIDERS_HINT = (
    "Add the server under mcp_servers.<your tenant> in the providers file "
    "(--providers-file / MCP_RUNTIME_PROVIDERS_FILE); steps.list shows the servers and tools you may use."
)


class McpToolConfig(StepConfig):
    """`onUncertain` None: `retry` when the server entry is `idempotent`, else `fail`.
    `statusTool` (for `reconcile`) is called with `{statusArgument: <operation id>}` and answers
    structured `{"found": bool, "result": ...}`."""

    server: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    on_uncertain: UncertaintyPolicy | None = None
    status_tool: str | None = None
    status_argument: str = Field(default="operation_id", min_length=1)

    @model_validator(mode="after")
    def _reconcile_needs_status(self) -> McpToolConfig:
        if self.on_uncertain is UncertaintyPolicy.RECONCILE and not self.status_tool:
            raise ValueError("onUncertain 'reconcile' needs statusTool, the server's status tool")
        return self

    def policy(self, entry: McpEntry) -> UncertaintyPolicy:
        if self.on_uncertain is not None:
            return self.on_uncertain
        return UncertaintyPolicy.RETRY if entry.idempotent else UncertaintyPolicy.FAIL


class McpToolExecutor:
    step_key = "mcp.tool"
    config_model = McpToolConfig
    description = (
        "Call a tool of one of your tenant's MCP servers (providers file mcp_servers) with the step's "
        "inputs as arguments; its structuredContent is the result. A call cut by a crash is settled by "
        "onUncertain (the operation id travels in _meta)."
    )
    input_schema = DECISION_INPUT_SCHEMA

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers

    async def check_for_tenant(
        self, config: McpToolConfig, step: StepDefinition, snapshot: ExecutionContextSnapshot
    ) -> None:
        """Submit-time: the tenant's server and tool, and the step's input against the tool's schema
        when the server answers (an unreachable server is checked at run time instead)."""
        tenant = snapshot.tenant_id
        entry = self.servers.entry(tenant, config.server)
        if entry is None:
            raise StepConfigError(self.servers.unknown_message(tenant, config.server), hint=PROVIDERS_HINT)
        if not entry.allows(config.tool):
            raise StepConfigError(_not_allowed(config), hint=PROVIDERS_HINT)
        try:
            tools = await asyncio.wait_for(self.servers.tools(tenant, config.server), entry.connect_timeout_s)
        except (StepFailure, TimeoutError) as error:
            log.warning(
                "mcp_tool.schema_unchecked server=%s tool=%s: %s",
                config.server,
                config.tool,
                getattr(error, "message", "timed out"),
                extra={"tenant_id": tenant, "server": config.server, "tool": config.tool},
            )
            return
        tool = _offered(tools, config)
        problems = submit_problems(dict(tool.input_schema), dict(step.input))
        if problems is not None:
            raise StepConfigError(
                f"the input of tool {config.tool!r} of MCP server {config.server!r} does not fit its "
                f"input schema: {problems}",
                hint="Fix the step's `input`; steps.list shows the tool's input schema.",
            )

    async def describe_tool(
        self, config: dict[str, Any], snapshot: ExecutionContextSnapshot | None
    ) -> tuple[str, dict[str, Any]]:
        """What an agent offers its model for this step as a tool: the MCP tool's description and
        input schema, from the run's tenant's server (StepFailure as for a call)."""
        parsed = McpToolConfig.model_validate(config)
        tenant = snapshot.tenant_id if snapshot is not None else None
        self.servers.resolve(tenant, parsed.server)
        assert tenant is not None
        tool = _offered(await self.servers.tools(tenant, parsed.server), parsed, failure=True)
        return tool.description or "", dict(tool.input_schema)

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(McpToolConfig, invocation)
        tenant = invocation.snapshot.tenant_id if invocation.snapshot is not None else None
        entry = self.servers.resolve(tenant, config.server)
        assert tenant is not None  # resolve() found an entry, so there is a tenant
        if not entry.allows(config.tool):
            raise StepFailure(_not_allowed(config), code="permanent")
        tool = _offered(await self.servers.tools(tenant, config.server), config, failure=True)
        arguments = {name: unwrap_result(value) for name, value in invocation.inputs.items()}
        problems = call_problems(dict(tool.input_schema), arguments)
        if problems is not None:
            raise StepFailure(
                f"the arguments of {_what(config)} do not fit its input schema: {problems}", code="permanent"
            )
        connection = self.servers.connection(tenant, config.server)

        async def call(operation_id: str) -> dict[str, Any]:
            result = await _called(connection, config.tool, arguments, entry, operation_id, _what(config))
            if result.is_error:
                raise tool_error(_what(config), result)
            meta = {"server": config.server, "tool": config.tool, "operationId": operation_id}
            return step_result(result_data(result), **meta)

        async def reconcile(operation_id: str) -> dict[str, Any] | None:
            assert config.status_tool is not None
            what = f"status tool {config.status_tool!r} of MCP server {config.server!r}"
            status = await _called(
                connection,
                config.status_tool,
                {config.status_argument: operation_id},
                entry,
                operation_id,
                what,
            )
            if status.is_error:
                raise tool_error(what, status)
            found = status.structured_content or {}
            if found.get("found") is not True:
                return None
            meta = {
                "server": config.server,
                "tool": config.tool,
                "operationId": operation_id,
                "reconciled": True,
            }
            return step_result(found.get("result"), **meta)

        return await guarded_call(
            invocation,
            "call",
            config.policy(entry),
            call,
            reconcile=reconcile,
            from_decision=lambda decision: step_result(decision.result, settledBy="human", tool=config.tool),
            peer=_what(config),
        )


async def _called(
    connection: McpConnection,
    tool: str,
    arguments: dict[str, Any],
    entry: McpEntry,
    operation_id: str,
    what: str,
) -> CallToolResult:
    """The server's answer; a session that could not open is a definite failure (nothing sent)."""
    try:
        return await connection.call_tool(tool, arguments, {entry.operation_meta_key: operation_id})
    except SessionUnavailable as error:
        raise unreachable(connection.label, error.__cause__ or error) from error
    except StepFailure:
        raise
    except Exception as error:
        raise call_error(what, error) from error


def _offered(tools: list[Tool], config: McpToolConfig, *, failure: bool = False) -> Tool:
    for tool in tools:
        if tool.name == config.tool:
            return tool
    offered = ", ".join(sorted(t.name for t in tools)) or "none"
    message = f"MCP server {config.server!r} offers no tool {config.tool!r} (offered: {offered})"
    if failure:
        raise StepFailure(message, code="permanent")
    raise StepConfigError(message, hint="steps.list shows the tools of your MCP servers.")


def _not_allowed(config: McpToolConfig) -> str:
    return f"tool {config.tool!r} of MCP server {config.server!r} is not in its allowed_tools"


def _what(config: McpToolConfig) -> str:
    return f"tool {config.tool!r} of MCP server {config.server!r}"
