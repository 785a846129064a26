"""`tasks/result` (2025-11-25): wait for a task's outcome, asking the client for its input.

Owns the blocking wait the 2025-11-25 specification requires (answer only once the task is
terminal), and, while the task is `input_required`, the form elicitation sent on this
request's own stream (tagged with the task in `_meta`) whose accepted content answers the
waiting step like `input.submit`. A client that declared no elicitation, or a caller without
the `run:input` permission, is not asked: someone else can still answer (`input.submit`).
A declined or dismissed form is not asked again in this wait. Must not decide statuses.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    ClientCapabilities,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
)

from mcp_runtime._guard import ToolGuard
from mcp_runtime._permissions import Permission
from mcp_runtime._rbac import PermissionDeniedError
from mcp_runtime.tasks._shapes import input_message
from mcp_runtime.tasks._wire import RELATED_TASK_META_KEY
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.tasks import InputRequest, TaskService, TaskView

log = logging.getLogger("mcp_runtime.tasks")


class OutcomeWait:
    def __init__(self, tasks: TaskService, guard: ToolGuard) -> None:
        self.tasks = tasks
        self.guard = guard

    async def outcome(
        self, task_id: str, snapshot: ExecutionContextSnapshot, ctx: ServerRequestContext[Any, Any]
    ) -> TaskView:
        asked: set[str] = set()
        while True:
            view = await self.tasks.get(task_id, snapshot)
            if view.status.is_terminal:
                return view
            request = view.input_request
            if request is not None and request.key not in asked and self._may_ask(ctx):
                asked.add(request.key)
                await self._ask(view, request, snapshot, ctx)
                continue
            # The run advances in whichever process runs it; its state is polled, at the
            # interval the task suggests to its clients.
            await anyio.sleep(view.record.poll_interval_ms / 1000)

    def _may_ask(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        if not ctx.session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability())):
            return False
        try:
            self.guard.authorize_request(Permission.RUN_INPUT, ctx)
        except PermissionDeniedError:
            return False
        return True

    async def _ask(
        self,
        view: TaskView,
        request: InputRequest,
        snapshot: ExecutionContextSnapshot,
        ctx: ServerRequestContext[Any, Any],
    ) -> None:
        elicitation = ElicitRequest(
            params=ElicitRequestFormParams(
                message=input_message(request),
                requested_schema=request.input_schema,
                _meta={RELATED_TASK_META_KEY: {"taskId": view.record.task_id}},
            )
        )
        answer = await ctx.session.send_request(
            elicitation, ElicitResult, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
        )
        log.info(
            "task.input_elicited",
            extra={"task_id": view.record.task_id, "action": answer.action, "tenant_id": snapshot.tenant_id},
        )
        if answer.action == "accept":
            await self.tasks.answer(view.record.task_id, {request.key: dict(answer.content or {})}, snapshot)
