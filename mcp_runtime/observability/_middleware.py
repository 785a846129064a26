"""MCP request telemetry: builds on the SDK's OpenTelemetry span and records the duration metric.

The SDK's own `OpenTelemetryMiddleware` (outermost on every server) already opens the
SERVER span `{mcp.method.name} {target}` under the client's `params._meta.traceparent`, with
`mcp.method.name`, `mcp.protocol.version`, `jsonrpc.request.id`, `gen_ai.operation.name`,
`gen_ai.tool.name` / `gen_ai.prompt.name` and `error.type`. `McpTelemetryMiddleware` runs
inside it and owns what the SDK leaves out: `mcp.session.id`, `jsonrpc.protocol.version`,
`network.transport` / `network.protocol.name`, `client.address` / `client.port`,
`mcp.resource.uri`, and the tool error's `[code]` (`mcprt.error.code`); and it records
`mcp_server_operation_duration_seconds` for every request and notification. Everything a tool
does (submit, dispatch) runs inside that span, so the run's trace continues the client's.
Must not record arguments, results, tokens or principals.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from opentelemetry import trace
from pydantic import ValidationError
from starlette.requests import Request

from mcp_runtime.observability._operation_metrics import McpOperationMetrics

_SESSION_HEADER = "mcp-session-id"
_TOOL_ERROR = "tool_error"
# Our tool errors read "[code] what happened. Next: ..." (the SDK may prefix its own words).
_ERROR_CODE = re.compile(r"\[([a-z_]{1,64})\]")


class McpTelemetryMiddleware:
    """Context-tier server middleware; `metrics` None records spans only (no registry)."""

    def __init__(self, metrics: McpOperationMetrics | None, tools: frozenset[str]) -> None:
        self.metrics = metrics
        self.tools = tools

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        started = time.perf_counter()
        span = trace.get_current_span()  # the SDK's span for this message
        if span.is_recording():
            span.set_attributes(_request_attributes(ctx))
        error_type = ""
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            error_type = str(exc.error.code)
            raise
        except ValidationError:
            error_type = str(INVALID_PARAMS)
            raise
        except Exception as exc:
            error_type = type(exc).__qualname__
            raise
        else:
            code = _tool_error_code(result) if ctx.method == "tools/call" else None
            if code is not None:
                error_type = _TOOL_ERROR
                if span.is_recording() and code:
                    span.set_attribute("mcprt.error.code", code)
            return result
        finally:
            if self.metrics is not None:
                tool = _target(ctx) if ctx.method == "tools/call" else None
                seconds = time.perf_counter() - started
                self.metrics.observe(ctx.method, tool, error_type, seconds, tools=self.tools)


def _target(ctx: ServerRequestContext[Any, Any]) -> str:
    name = ctx.params.get("name") if ctx.params else None
    return name if isinstance(name, str) else ""


def _request_attributes(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = {"jsonrpc.protocol.version": "2.0"}
    uri = ctx.params.get("uri") if ctx.params else None
    if isinstance(uri, str) and ctx.method.startswith("resources/"):
        attributes["mcp.resource.uri"] = uri
    request = ctx.request
    if not isinstance(request, Request):
        attributes["network.transport"] = "pipe"  # stdio
        return attributes
    attributes.update({"network.transport": "tcp", "network.protocol.name": "http"})
    session_id = request.headers.get(_SESSION_HEADER)
    if session_id:
        attributes["mcp.session.id"] = session_id
    if request.client is not None:
        attributes.update({"client.address": request.client.host, "client.port": request.client.port})
    return attributes


def _tool_error_code(result: HandlerResult) -> str | None:
    """None when the tool call succeeded; else its `[code]` ("" when the text carries none)."""
    match result:
        case CallToolResult(is_error=True, content=content):
            texts = [getattr(block, "text", "") for block in content]
        case {"isError": True, **rest}:
            texts = [block.get("text", "") for block in rest.get("content", []) if isinstance(block, Mapping)]
        case _:
            return None
    found = _ERROR_CODE.search(texts[0]) if texts and isinstance(texts[0], str) else None
    return found.group(1) if found else ""
