"""The dashboard's pages: runs list, run detail, capacity, schedules (each only for a signed-in
user).

Owns reading what each page shows through the gate of the tool that reads the same (runs
list: the listing tool, its counts per status, and a search by any run id through
`run.status`; run: `run.status` for its graph, input and the shown steps' outputs, then
`ledger` / `trace` for its evidence; capacity: `capacity.list`, the tenant's view without
other tenants' activity; schedules: `schedules.list`, its unreadable schedules apart), and
which actions the run page offers (only those the user's roles grant: a viewer sees no action
at all). A failure is the page of its error, with the tool's error text. Must not change any
state.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_runtime._backend import ToolBackend
from mcp_runtime._errors import tool_error_text
from mcp_runtime._inputs import RunIdInput
from mcp_runtime.dashboard._access import DashboardAccess, DashboardUser
from mcp_runtime.dashboard._conversation import conversations
from mcp_runtime.dashboard._input_form import form_fields
from mcp_runtime.dashboard._listing import LISTING_TOOL, list_runs, run_filters
from mcp_runtime.dashboard._run_page import (
    STEPS_PER_PAGE,
    VALUE_CHARS,
    ledger_page,
    run_links,
    run_timing,
    steps_on_page,
    steps_page,
)
from mcp_runtime.dashboard._runs_view import (
    LISTED_STATUSES,
    failure_text,
    page_links,
    row_view,
    status_counts,
)
from mcp_runtime.dashboard._security import UI_PATH
from mcp_runtime.dashboard._templates import error_page, page
from mcp_runtime.run_view import (
    MAX_DRAWN_STEPS,
    Redactor,
    RunEvidence,
    RunGraph,
    RunViewReader,
    graph_svg,
    shown,
    timeline_svg,
)
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.queueing import SharedRunStatus
from runtime_core.scheduling import UNREADABLE_SCHEDULE_NEXT_STEP, ScheduleListing

ACTION_TOOLS = {
    "cancel": "cancel",
    "pause": "pause",
    "resume": "resume",
    "input": "input.submit",
    "again": "runs.retry",
    "replay": "replay",
}
"""Each run action of the dashboard and the tool whose permission (and behaviour) it has."""
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
    def __init__(
        self, access: DashboardAccess, backend: ToolBackend, reader: RunViewReader, redactor: Redactor
    ) -> None:
        self.access = access
        self.backend = backend
        self.reader = reader
        self.redactor = redactor

    async def home(self, request: Request) -> Response:
        return RedirectResponse(f"{UI_PATH}/runs", status_code=303)

    @signed_in
    async def runs(self, request: Request, user: DashboardUser) -> Response:
        wanted = request.query_params.get("q", "").strip()
        if wanted:
            return await self._find_run(user, wanted)
        try:
            snapshot = user.admit(LISTING_TOOL)
            filters = run_filters(request.query_params)
            listed = await list_runs(self.backend.control_plane, filters, snapshot)
            counts = await self.backend.control_plane.count_runs(filters, snapshot)
            depth = await self.backend.control_plane.queue_depth(snapshot)
        except Exception as exc:
            return error_page(request, LISTING_TOOL, exc, user=user, nav="runs")
        query = dict(request.query_params)
        live_query = request.url.query
        return page(
            request,
            "runs.html.j2",
            user=user,
            nav="runs",
            notice=None if REFRESH_HEADER in request.headers else user.session.take_notice(),
            filters=filters,
            rows=[row_view(run, self.redactor) for run in listed.runs],
            counts=status_counts(counts, query, filters.status),
            counts_partial=counts.partial,
            links=page_links(listed, query),
            queue_depth=depth,
            statuses=LISTED_STATUSES,
            shared_statuses=[status.value for status in SharedRunStatus],
            pipelines=self.backend.catalog.names(),
            live_url=f"{UI_PATH}/events/runs" + (f"?{live_query}" if live_query else ""),
        )

    async def _find_run(self, user: DashboardUser, wanted: str) -> Response:
        """Any id of a run (shared, execution, local) goes to its page; another tenant's or an
        unknown one back to the list with the `run.status` tool's answer."""
        try:
            run_id = RunIdInput.model_validate({"run_id": wanted}).run_id  # the tools' id rules
            found = await self.backend.control_plane.run_status(run_id, user.admit("run.status"))
        except Exception as exc:
            user.session.notice = tool_error_text("run.status", exc)
            return RedirectResponse(f"{UI_PATH}/runs", status_code=303)
        return RedirectResponse(f"{UI_PATH}/runs/{found.shared_run_id or run_id}", status_code=303)

    @signed_in
    async def run(self, request: Request, user: DashboardUser) -> Response:
        run_id = request.path_params["run_id"]
        try:
            snapshot = user.admit("run.status")
            graph = await self.reader.graph(run_id, snapshot)
            shown_steps, _, _ = steps_on_page(graph, request.query_params)
            data = await self.reader.data(graph, snapshot, [node.name for node in shown_steps])
        except Exception as exc:
            return error_page(request, "run.status", exc, user=user, notice=user.session.take_notice())
        evidence, evidence_error = await self._evidence(user, graph)
        may = {action: user.may(tool) for action, tool in ACTION_TOOLS.items()}
        refresh = REFRESH_HEADER in request.headers
        now = datetime.now(UTC)
        return page(
            request,
            "run.html.j2",
            user=user,
            notice=None if refresh else user.session.take_notice(),
            graph=graph,
            graph_svg=graph_svg(graph),
            conversations=conversations(graph.run),
            timing=run_timing(graph, now),
            run_input=shown(data.input, self.redactor, VALUE_CHARS) if data.input is not None else None,
            run_result=shown(graph.run.result, self.redactor, VALUE_CHARS) if graph.run.result else None,
            failure=failure_text(graph.run.failure_reason, graph.run.failed_step, self.redactor),
            steps=steps_page(graph, evidence, data, self.redactor, request.query_params),
            ledger=ledger_page(evidence.ledger, self.redactor, request.query_params) if evidence else None,
            links=run_links(evidence.ledger) if evidence else None,
            large=len(graph.nodes) > STEPS_PER_PAGE,
            evidence=evidence,
            evidence_error=evidence_error,
            timeline_svg=timeline_svg(evidence.timeline) if evidence else None,
            may=may,
            any_action=any(may.values()),
            request_key=secrets.token_urlsafe(12),
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
            unreadable_next_step=UNREADABLE_SCHEDULE_NEXT_STEP,
        )

    async def _list_schedules(self, snapshot: ExecutionContextSnapshot) -> ScheduleListing:
        if self.backend.schedules is None:
            return ScheduleListing(schedules=[], unreadable=[], next_after_name=None)
        return await self.backend.schedules.list(snapshot, limit=MAX_LISTED_SCHEDULES)

    @staticmethod
    async def _read(
        user: DashboardUser, tool_name: str, read: Callable[[Any], Awaitable[Any]]
    ) -> tuple[Any, str | None]:
        try:
            return await read(user.admit(tool_name)), None
        except Exception as exc:
            return None, tool_error_text(tool_name, exc)
