"""Live updates of the dashboard: server-sent event streams of a run and of the runs list.

Owns each stream's loop: read what the page shows through the same gate as the page (the
session is re-checked and the tool's permission re-admitted on every read, so signing out
or losing a role ends the stream), send an event only when something changed (a run: its
status and every step's shown status, with text and colour class; the list: its rows and
the queue depth), stop once the run is done or the server stops, and the cap on open
streams. Runs advance in whichever process executes them, so the streams poll the runtime
at a fixed interval. Must not change any state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from mcp_runtime._backend import ToolBackend
from mcp_runtime._errors import tool_error_text
from mcp_runtime.dashboard._access import DashboardAccess, DashboardUser
from mcp_runtime.dashboard._conversation import conversation_signature
from mcp_runtime.dashboard._listing import LISTING_TOOL, list_runs, run_filters
from mcp_runtime.dashboard._settings import DashboardSettings
from mcp_runtime.run_view import RunViewReader

RECONNECT_MS = 3_000
PING_S = 15
SEND_TIMEOUT_S = 30
"""A client that stops reading for this long loses its stream (it reconnects when it reads again)."""

Reading = Callable[[DashboardUser], Coroutine[Any, Any, tuple[dict[str, Any], bool]]]
"""One read of a stream: (the state to send when it changed, whether the stream is finished)."""


class LiveStreams:
    def __init__(
        self,
        access: DashboardAccess,
        backend: ToolBackend,
        reader: RunViewReader,
        settings: DashboardSettings,
        stopping: asyncio.Event,
    ) -> None:
        self.access = access
        self.backend = backend
        self.reader = reader
        self.settings = settings
        self.stopping = stopping
        self.open_streams = 0

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]

        async def read(user: DashboardUser) -> tuple[dict[str, Any], bool]:
            graph = await self.reader.graph(run_id, user.admit("run.status"))
            # An agent's new turn or streamed text changes no step status: it changes this.
            return {**graph.live_state(), "conversation": conversation_signature(graph.run)}, graph.done

        return self._stream(request, "status", "run.status", read, self.settings.run_poll_ms)

    async def runs(self, request: Request) -> Response:
        try:
            filters = run_filters(request.query_params)
        except ValueError as exc:
            return PlainTextResponse(tool_error_text(LISTING_TOOL, exc), status_code=400)

        async def read(user: DashboardUser) -> tuple[dict[str, Any], bool]:
            snapshot = user.admit(LISTING_TOOL)
            listed = await list_runs(self.backend.control_plane, filters, snapshot)
            rows = [[r.shared_run_id, r.status, r.shared_status, r.failed_step] for r in listed.runs]
            return {
                "runs": rows,
                "queue_depth": await self.backend.control_plane.queue_depth(snapshot),
            }, False

        return self._stream(request, "runs", LISTING_TOOL, read, self.settings.list_poll_ms)

    def _stream(self, request: Request, event: str, tool: str, read: Reading, interval_ms: int) -> Response:
        if self.access.user(request) is None:
            return PlainTextResponse("[unauthenticated] Sign in to the dashboard first.", status_code=401)
        if self.open_streams >= self.settings.max_streams:
            return PlainTextResponse(
                "[busy] Too many live views are open. Next: retry later.", status_code=503
            )
        return EventSourceResponse(
            self._events(request, event, tool, read, interval_ms), ping=PING_S, send_timeout=SEND_TIMEOUT_S
        )

    async def _events(
        self, request: Request, event: str, tool: str, read: Reading, interval_ms: int
    ) -> AsyncIterator[ServerSentEvent]:
        self.open_streams += 1
        try:
            last: dict[str, Any] | None = None
            while not self.stopping.is_set():
                user = self.access.user(request)
                if user is None:
                    yield ServerSentEvent(event="ended", data="signed out")
                    return
                try:
                    state, finished = await read(user)
                except Exception as exc:
                    yield ServerSentEvent(event="failed", data=tool_error_text(tool, exc))
                    return
                if state != last:
                    yield ServerSentEvent(event=event, data=json.dumps(state), retry=RECONNECT_MS)
                    last = state
                if finished:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), interval_ms / 1000)
        finally:
            self.open_streams -= 1
