"""The dashboard's pages: runs list, run detail, capacity, schedules (each only for a signed-in
user).

Owns reading what each page shows through the gate of the tool that reads the same (runs
list: the listing tool; run: `run.status`, then `ledger` / `trace` for its evidence;
capacity: `capacity.list`, the tenant's view without other tenants' activity; schedules:
`schedules.list`), and which actions the run page offers (only those the user's roles grant:
a viewer sees no action at all). A failure is the page of its error, with the tool's error
text. Must not change any state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_runtime._backend import ToolBackend
from mcp_runtime._errors import tool_error_text
from mcp_runtime.dashboard._access import DashboardAccess, DashboardUser
from mcp_runtime.dashboard._conversation import conversations
from mcp_runtime.dashboard._input_form import form_fields
from mcp_runtime.dashboard._listing import LISTING_TOOL, list_runs, run_filters
from mcp_runtime.dashboard._security import UI_PATH
from mcp_runtime.dashboard._templates import error_page, page
from mcp_runtime.run_view import (
    MAX_DRAWN_STEPS,
    RunEvidence,
    RunGraph,
    RunViewReader,
    graph_svg,
    timeline_svg,
)
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.queueing import SharedRunStatus
from runtime_core.scheduling import ScheduleView

ACTION_TOOLS = {"cancel": "cancel", "pause": "pause", "resume": "resume", "input": "input.submit"}
"""Each run action of the dashboard and the tool whose permission (and behaviour) it has."""
OVERALL_STATUSES = ["QueuedGlobally", "Queued", "Running", "Completed", "Failed", "Cancelled", "Rejected"]
MAX_LISTED_SCHEDULES = 500
REFRESH_HEADER = "x-dashboard-refresh"
"""Sent by the page's own live refresh: such a read leaves the one-shot notice in place."""

Page = Callable[[Any, Request, DashboardUser], Awaitable[Response]]


def signed_in(handler: Page) -> Callable[[Any, Request], Awaitable[Response]]:
    """Run the page for the session's user; without a session, go to the login page and come back."""

    async def endpoint(self: Any, request: Request) -> Response:
        user = self.access.user(request)
        if user is None:
            wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"{UI_PATH}/login?{urlencode({'next': wanted})}", status_code=303)
        return await handler(self, request, user)

    return endpoint


class DashboardPages:
    def __init__(self, access: DashboardAccess, backend: ToolBackend, reader: RunViewReader) -> None:
        self.access = access
        self.backend = backend
        self.reader = reader

    async def home(self, request: Request) -> Response:
        return RedirectResponse(f"{UI_PATH}/runs", status_code=303)

    @signed_in
    async def runs(self, request: Request, user: DashboardUser) -> Response:
        try:
            snapshot = user.admit(LISTING_TOOL)
            filters = run_filters(request.query_params)
            listed = await list_runs(self.backend.control_plane, filters, snapshot)
            depth = await self.backend.control_plane.queue_depth(snapshot)
        except Exception as exc:
            return error_page(request, LISTING_TOOL, exc, user=user, nav="runs")
        query = request.url.query
        older = {**dict(request.query_params), "cursor": listed.next_cursor or ""}
        return page(
            request,
            "runs.html.j2",
            user=user,
            nav="runs",
            filters=filters,
            page=listed,
            queue_depth=depth,
            statuses=OVERALL_STATUSES,
            shared_statuses=[status.value for status in SharedRunStatus],
            pipelines=self.backend.catalog.names(),
            live_url=f"{UI_PATH}/events/runs" + (f"?{query}" if query else ""),
            older_url=f"{UI_PATH}/runs?{urlencode(older)}",
        )

    @signed_in
    async def run(self, request: Request, user: DashboardUser) -> Response:
        run_id = request.path_params["run_id"]
        try:
            graph = await self.reader.graph(run_id, user.admit("run.status"))
        except Exception as exc:
            return error_page(request, "run.status", exc, user=user, notice=user.session.take_notice())
        evidence, evidence_error = await self._evidence(user, graph)
        may = {action: user.may(tool) for action, tool in ACTION_TOOLS.items()}
        refresh = REFRESH_HEADER in request.headers
        return page(
            request,
            "run.html.j2",
            user=user,
            notice=None if refresh else user.session.take_notice(),
            graph=graph,
            graph_svg=graph_svg(graph),
            conversations=conversations(graph.run),
            evidence=evidence,
            evidence_error=evidence_error,
            histories=evidence.histories if evidence else {},
            timeline_svg=timeline_svg(evidence.timeline) if evidence else None,
            may=may,
            any_action=any(may.values()),
            input_fields=form_fields(graph.waiting.input_schema) if graph.waiting else None,
            max_drawn=MAX_DRAWN_STEPS,
            live_url=f"{UI_PATH}/events/runs/{graph.run_id}",
        )

    async def _evidence(self, user: DashboardUser, graph: RunGraph) -> tuple[RunEvidence | None, str | None]:
        """The ledger and trace, under the permission of the `ledger` and `trace` tools."""
        try:
            user.admit("ledger")
            snapshot = user.admit("trace")
            return await self.reader.evidence(graph.run, snapshot), None
        except Exception as exc:
            return None, tool_error_text("trace", exc)

    @signed_in
    async def capacity(self, request: Request, user: DashboardUser) -> Response:
        depth, depth_error = await self._read(user, LISTING_TOOL, self.backend.control_plane.queue_depth)
        instances, instances_error = await self._read(
            user, "capacity.list", self.backend.control_plane.tenant_capacity
        )
        return page(
            request,
            "capacity.html.j2",
            user=user,
            nav="capacity",
            queue_depth=depth,
            queue_error=depth_error,
            instances=instances,
            instances_error=instances_error,
        )

    @signed_in
    async def schedules(self, request: Request, user: DashboardUser) -> Response:
        schedules, schedules_error = await self._read(user, "schedules.list", self._list_schedules)
        return page(
            request,
            "schedules.html.j2",
            user=user,
            nav="schedules",
            schedules=schedules,
            schedules_error=schedules_error,
        )

    async def _list_schedules(self, snapshot: ExecutionContextSnapshot) -> list[ScheduleView]:
        if self.backend.schedules is None:
            return []
        return await self.backend.schedules.list(snapshot, limit=MAX_LISTED_SCHEDULES)

    @staticmethod
    async def _read(
        user: DashboardUser, tool_name: str, read: Callable[[Any], Awaitable[Any]]
    ) -> tuple[Any, str | None]:
        try:
            return await read(user.admit(tool_name)), None
        except Exception as exc:
            return None, tool_error_text(tool_name, exc)
