"""RunProgress: a `submit` that carries a progress token follows its run to the end.

The MCP specification ends progress with the request ("progress notifications MUST stop
after completion"), and the SDK closes a request's stream once it answers, so a submit that
asks for progress stays open: it reports `notifications/progress` as the run's steps finish
(progress = finished steps, total = the pipeline's steps, a message naming the run's
status; while a streaming step writes its output, progress grows by fractions and the
message carries the step's new text, `<status> | <step>: <text>`) and answers once the run
is done, waits for human input, or `max_wait_s` passed (the run then carries on; follow it
with run.status or run://). Other requests are served meanwhile: the SDK runs each request in
its own task. The run's events arrive through Redis pub/sub from whichever process runs it;
the run is re-read on each event (and every `recheck_s`, since pub/sub may drop events while
Redis reconnects), so a missed event only delays an answer. Must not change the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable

from runtime_core.control_plane import ControlPlane, RunStatusView, run_final_status, run_is_done
from runtime_core.errors import StoreUnavailableError
from runtime_core.events import RunEvent, RunEventSubscriber
from runtime_core.identity import ExecutionContextSnapshot

ProgressReport = Callable[[float, float | None, str], Awaitable[None]]

DEFAULT_MAX_WAIT_S = 300.0
_FINISHED_STEP_STATUSES = frozenset({"Completed", "Failed"})
_FRACTION_SCALE = 1_000


def _finished_steps(view: RunStatusView) -> int:
    return sum(view.step_counts.get(status, 0) for status in _FINISHED_STEP_STATUSES)


def _settled(view: RunStatusView) -> bool:
    return run_is_done(view) or view.control_status == "WaitingForInput"


def _message(view: RunStatusView) -> str:
    waiting = view.control_status if view.control_status == "WaitingForInput" else None
    status = waiting or run_final_status(view) or "unknown"
    return f"run {view.shared_run_id}: {status}"


class RunProgress:
    def __init__(
        self,
        run_events: RunEventSubscriber,
        control_plane: ControlPlane,
        *,
        max_wait_s: float | None = None,
        recheck_s: float = 2.0,
    ) -> None:
        self.run_events = run_events
        self.control_plane = control_plane
        self.max_wait_s = max_wait_s if max_wait_s is not None else _max_wait_from_env()
        self.recheck_s = recheck_s

    async def follow(
        self, shared_run_id: str, snapshot: ExecutionContextSnapshot, report: ProgressReport
    ) -> RunStatusView | None:
        """Report progress until the run settles (or the wait ends); its last status (None when
        Redis became unreachable meanwhile: the submit still answers, without the run)."""
        changes: asyncio.Queue[RunEvent] = asyncio.Queue()

        def hear(event: RunEvent) -> None:
            if event.shared_run_id == shared_run_id and event.tenant_id == snapshot.tenant_id:
                changes.put_nowait(event)

        stop_hearing = self.run_events.listen(hear)
        try:
            with contextlib.suppress(TimeoutError):  # no pub/sub yet: re-reading alone still ends it
                await self.run_events.wait_subscribed()
            return await self._report_until_settled(shared_run_id, snapshot, report, changes)
        except StoreUnavailableError:
            return None  # the run was submitted: answer that, without its status
        finally:
            stop_hearing()

    async def _report_until_settled(
        self,
        shared_run_id: str,
        snapshot: ExecutionContextSnapshot,
        report: ProgressReport,
        changes: asyncio.Queue[RunEvent],
    ) -> RunStatusView:
        deadline = time.monotonic() + self.max_wait_s
        reported_steps, reported = -1, -1.0
        shown: dict[str, int] = {}  # characters of each step's output already sent
        while True:
            view = await self.control_plane.run_status(shared_run_id, snapshot)
            finished = _finished_steps(view)
            last = _settled(view) or deadline - time.monotonic() <= 0
            # Progress must increase with each notification, so the report of the last step
            # count waits for the run to settle (moments after its last step): that report
            # names the run's final status.
            every_step_finished = bool(view.steps_total) and finished == view.steps_total
            news = _new_output(view, shown)
            if finished > reported_steps and (last or not every_step_finished):
                reported_steps, reported = finished, float(finished)
                await report(finished, view.steps_total or None, _message(view))
            elif news and not last and finished + _fraction(view) > reported:
                reported = finished + _fraction(view)
                text = " | ".join(f"{step}: {piece}" for step, piece in news)
                await report(reported, view.steps_total or None, f"{_message(view)} | {text}")
            if last:
                return view
            remaining = deadline - time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changes.get(), min(self.recheck_s, remaining))
            while not changes.empty():  # one re-read covers every event heard meanwhile
                changes.get_nowait()


def _new_output(view: RunStatusView, shown: dict[str, int]) -> list[tuple[str, str]]:
    """(step, text) of what each streaming step wrote since it was last sent; marks it sent."""
    news = []
    for step in view.steps:
        if step.output is None or not step.output_length:
            continue
        new = step.output_length - shown.get(step.name, 0)
        if new > 0:
            news.append((step.name, step.output[-new:]))
            shown[step.name] = step.output_length
    return news


def _fraction(view: RunStatusView) -> float:
    """Below 1, growing with the characters streamed by the running steps."""
    written = sum(step.output_length or 0 for step in view.steps if step.status == "Running")
    return written / (written + _FRACTION_SCALE)


def _max_wait_from_env() -> float:
    return float(os.environ.get("MCP_RUNTIME_SUBMIT_PROGRESS_WAIT_S") or DEFAULT_MAX_WAIT_S)
