"""The run page's actions: cancel, pause, resume, answering human input, run again and replay.

Owns each action's checks in the order a tool makes them (a signed-in session and a
matching CSRF token first, then the permission of the tool doing the same through the
guard, then the tool's own input model: the same ids, waiting key and payload limits), the
call of the runtime_core service that tool calls, and the one-shot notice the run page then
shows (the outcome, or the tool's error text). "Run again" (`runs.retry`'s permission and
service: a new run with the same pipeline and input, linked to this one) then shows the new
run. A missing permission is refused with 403 and changes nothing. Must not decide what an
action does: the services do.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_runtime._backend import ToolBackend
from mcp_runtime._control_tools import control_output
from mcp_runtime._errors import tool_error_text
from mcp_runtime._inputs import CancelInput, InputSubmitInput
from mcp_runtime._rbac import PermissionDeniedError
from mcp_runtime._run_tools import RunTools
from mcp_runtime.dashboard._access import DashboardAccess, DashboardUser
from mcp_runtime.dashboard._input_form import payload_from_form
from mcp_runtime.dashboard._login import refused_form
from mcp_runtime.dashboard._pages import ACTION_TOOLS
from mcp_runtime.dashboard._security import UI_PATH
from mcp_runtime.dashboard._templates import error_page, page
from runtime_core.errors import ConflictError
from runtime_core.identity import ExecutionContextSnapshot

log = logging.getLogger("mcp_runtime.dashboard")


class DashboardActions:
    def __init__(self, access: DashboardAccess, backend: ToolBackend) -> None:
        self.access = access
        self.backend = backend
        self.runs = RunTools(backend.control_plane, backend.catalog)

    async def act(self, request: Request) -> Response:
        run_id, action = request.path_params["run_id"], request.path_params["action"]
        tool = ACTION_TOOLS.get(action)
        if tool is None:
            message = f"[not_found] No action '{action}'. Next: use the run page's buttons."
            return page(request, "error.html.j2", status_code=404, heading="Not found", message=message)
        user = self.access.user(request)
        if user is None:
            return RedirectResponse(f"{UI_PATH}/login", status_code=303)
        form = {key: str(value) for key, value in (await request.form()).items()}
        if not user.session.csrf_matches(form.get("csrf")):
            return refused_form(request)
        try:
            snapshot = user.admit(tool)
        except PermissionDeniedError as exc:
            return error_page(request, tool, exc, user=user)
        user.session.notice, shown_run = await self._outcome(user, action, tool, run_id, form, snapshot)
        return RedirectResponse(f"{UI_PATH}/runs/{shown_run}", status_code=303)

    async def _outcome(
        self,
        user: DashboardUser,
        action: str,
        tool: str,
        run_id: str,
        form: Mapping[str, str],
        snapshot: ExecutionContextSnapshot,
    ) -> tuple[str, str]:
        """The notice to show, and the run to show it on."""
        try:
            outcome, shown_run = await self._perform(action, run_id, form, snapshot)
        except Exception as exc:
            return tool_error_text(tool, exc), run_id
        log.info(
            "ui.action",
            extra={
                "action": action,
                "run_id": run_id,
                "tenant_id": snapshot.tenant_id,
                "user": user.principal.name,
            },
        )
        return outcome, shown_run

    async def _perform(
        self, action: str, run_id: str, form: Mapping[str, str], snapshot: ExecutionContextSnapshot
    ) -> tuple[str, str]:
        run_id = CancelInput.model_validate({"run_id": run_id}).run_id  # the tools' id rules
        if action == "cancel":
            return (await self.backend.control_plane.cancel(run_id, snapshot)).message, run_id
        if action == "again":
            return await self._run_again(run_id, form, snapshot)
        execution_id = await self.runs.execution_id_for(run_id, snapshot)
        if action == "pause":
            state = await self.backend.control.pause(execution_id, snapshot)
        elif action == "resume":
            state = await self.backend.control.resume(execution_id, snapshot)
        elif action == "replay":
            replayed = await self.backend.replay.replay(execution_id, snapshot)
            done = (
                "restored from its " + replayed.source.value.replace("_", " ")
                if replayed.restored
                else "still in hot state"
            )
            return f"Replay of execution {execution_id}: {done} (status {replayed.status}).", run_id
        else:
            return await self._answer(execution_id, form, snapshot), run_id
        return (
            f"{action.capitalize()} requested: control status {control_output(state).control_status}.",
            run_id,
        )

    async def _run_again(
        self, run_id: str, form: Mapping[str, str], snapshot: ExecutionContextSnapshot
    ) -> tuple[str, str]:
        """A new run of this one (the page's request key: a repeated click makes it once)."""
        if self.backend.bulk is None:
            raise ConflictError("Running again is not available on this server.", hint="Submit the run anew.")
        request_key = form.get("request", "")[:64] or "page"
        result = await self.backend.bulk.run_again(snapshot, run_id, request_key)
        if result.new_run_id is None:
            raise ConflictError(
                f"Not run again: {result.detail}.", hint="Reload the run page to see its state."
            )
        return f"Run again as {result.new_run_id}, a new run of {result.shared_run_id}.", result.new_run_id

    async def _answer(
        self, execution_id: str, form: Mapping[str, str], snapshot: ExecutionContextSnapshot
    ) -> str:
        waiting = (
            await self.backend.tasks.input_request(execution_id, snapshot) if self.backend.tasks else None
        )
        if waiting is None:
            raise ConflictError(
                "The run is not waiting for input any more.", hint="Reload the run page to see its state."
            )
        arguments: dict[str, Any] = {
            "execution_id": execution_id,
            "waiting_key": form.get("waiting_key", ""),
            "payload": payload_from_form(waiting.input_schema, form),
        }
        request = InputSubmitInput.model_validate(arguments)
        state = await self.backend.control.submit_input(
            request.execution_id, request.waiting_key, request.payload, snapshot
        )
        status = control_output(state).control_status
        return f"Answer sent under key '{request.waiting_key}': control status {status}."
