"""The run view inside MCP hosts: the MCP Apps extension (`io.modelcontextprotocol/ui`).

Owns the extension the server advertises (the SDK's `Apps`), the `ui://` resources and
the link from `run.status` to them:
- `ui://mcp-runtime/run-view`: the app template `run.status` names in its tool `_meta.ui`
  (a host renders it with the tool's result and it then shows the run that result links);
- `ui://mcp-runtime/runs/{run_id}`: one run's view (its DAG with statuses, its steps), a
  self-contained `text/html;profile=mcp-app` document read through the `run.status` gate:
  the caller's permission and tenant, another tenant's run answering like an unknown one;
- every successful `run.status` result names its run's resource in `_meta.ui.resourceUri`.
Must not read runs itself: the RunViewReader does, with the snapshot the guard admitted.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.apps import APP_MIME_TYPE, Apps
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolRequestParams, CallToolResult

from mcp_runtime._errors import tool_error_text
from mcp_runtime._guard import ToolGuard
from mcp_runtime.run_view import RunViewReader, run_app_html
from runtime_core.errors import NotFoundError

log = logging.getLogger("mcp_runtime.apps")

RUN_VIEW_TEMPLATE_URI = "ui://mcp-runtime/run-view"
RUN_VIEW_URI_TEMPLATE = "ui://mcp-runtime/runs/{run_id}"
LINKED_TOOL = "run.status"


def run_view_uri(run_id: str) -> str:
    return RUN_VIEW_URI_TEMPLATE.format(run_id=run_id)


class RunViewApps(Apps):
    """MCP Apps with the run view template, and the per-run link on `run.status` results."""

    def __init__(self) -> None:
        super().__init__()
        self.add_html_resource(
            RUN_VIEW_TEMPLATE_URI,
            run_app_html(None),
            name="run-view",
            title="Run view",
            description="The run a run.status result links: its pipeline graph with each step's status.",
            prefers_border=True,
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if params.name != LINKED_TOOL or not isinstance(result, CallToolResult) or result.is_error:
            return result
        answer = result.structured_content or {}
        run_id = answer.get("shared_run_id") or answer.get("requested_id")
        if not run_id:
            return result
        meta = {**(result.meta or {}), "ui": {"resourceUri": run_view_uri(str(run_id))}}
        return result.model_copy(update={"meta": meta})


def link_run_view(tool: Tool) -> Tool:
    """`run.status` names the run view template in its `_meta.ui` (hosts render its results with it)."""
    if tool.name != LINKED_TOOL:
        return tool
    meta = {**(tool.meta or {}), "ui": {"resourceUri": RUN_VIEW_TEMPLATE_URI}}
    return tool.model_copy(update={"meta": meta})


def register_run_view_resources(server: MCPServer, reader: RunViewReader, guard: ToolGuard) -> None:
    @server.resource(
        RUN_VIEW_URI_TEMPLATE,
        name="run-view-of-a-run",
        title="Run view of one run",
        description="One run's pipeline graph with each step's status, as an MCP App (HTML). Any run id of "
        "your tenant: srun_, lrun_ or exec_.",
        mime_type=APP_MIME_TYPE,
    )
    async def run_view(run_id: str, ctx: Context) -> str:
        try:
            snapshot = guard.admit(LINKED_TOOL, ctx)
            graph = await reader.graph(run_id, snapshot)
        except NotFoundError as exc:
            raise ResourceNotFoundError(tool_error_text(LINKED_TOOL, exc)) from exc
        except Exception as exc:
            raise ResourceError(tool_error_text(LINKED_TOOL, exc)) from exc
        log.info("apps.run_view_read", extra={"run_id": graph.run_id, "tenant_id": snapshot.tenant_id})
        return run_app_html(graph)
