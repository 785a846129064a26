"""The resource `run://{run_id}`: one run of the caller's tenant, as `run.status` answers it.

Owns the resource template (JSON of the run's `run.status` answer, steps included), checked
like the tool: `run:read`, and another tenant's run reads exactly like an unknown one.
Subscribers of the URI are told when the run's status changes (`_bus`, `_legacy`).
Must not change the run.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from mcp_runtime._guard import AuthenticationRequiredError, ToolGuard
from mcp_runtime._permissions import Permission
from mcp_runtime._rbac import PermissionDeniedError
from mcp_runtime._run_answers import run_status_output
from mcp_runtime.notifications._uris import RUN_URI_TEMPLATE
from runtime_core.control_plane import ControlPlane
from runtime_core.errors import NotFoundError


def register_run_resource(server: MCPServer, control_plane: ControlPlane, guard: ToolGuard) -> None:
    @server.resource(
        RUN_URI_TEMPLATE,
        name="run",
        title="Run status",
        description="One run of your tenant by SharedRunId, LocalRunId or ExecutionId: the run.status "
        "answer as JSON. Subscribe to it (resources/subscribe, or subscriptions/listen) to be told "
        "when the run's status changes.",
        mime_type="application/json",
    )
    async def run_resource(run_id: str, ctx: Context) -> str:
        try:
            principal = guard.authorize(Permission.RUN_READ, ctx)
        except (AuthenticationRequiredError, PermissionDeniedError) as exc:
            raise ResourceError(str(exc)) from exc
        snapshot = principal.snapshot(context_key=f"mcp:resources/read:{ctx.request_id}")
        try:
            view = await control_plane.run_status(run_id, snapshot)
        except NotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        return run_status_output(view).model_dump_json(indent=2)
