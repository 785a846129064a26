"""The local runs a runtime instance holds in memory: queued, running and recently finished.

Owns the local queue (hot enqueue order, pause / resume and who asked), the running runs'
tasks, which run each dispatch attempt created (while the run is kept), the dispatch
attempts being accepted now, the wake-up of the instance's controller on every change, and
the bounded window of finished runs kept for `run_view` / `wait_for_run` (older ones are
read from the run index). Must not write anything: the instance and its run driver do.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque

from runtime_core.errors import NotFoundError
from runtime_core.instances._local_run import LocalRun
from runtime_core.instances._models import LocalRunRequest, QueueStateView

# Finished local runs kept in memory for `run_view` / `wait_for_run`; older ones are
# dropped (their index records stay in Redis), so memory stays bounded under load.
FINISHED_RUNS_KEPT = 1_000


class LocalQueue:
    def __init__(self, runtime_instance_id: str) -> None:
        self.runtime_instance_id = runtime_instance_id
        self.runs: dict[str, LocalRun] = {}
        self.queued: deque[LocalRun] = deque()
        self.running: dict[str, asyncio.Task[None]] = {}  # by LocalRunId
        self.accepting: dict[object, asyncio.Future[LocalRun]] = {}  # by dispatch attempt id
        self.paused = False
        self.pause_reason: str | None = None
        self.pause_requested_by: str | None = None
        self.wake = asyncio.Event()  # the controller looks at the queue again
        self._attempts: dict[str, str] = {}  # dispatch attempt id -> LocalRunId, while in `runs`
        self._finished: deque[str] = deque()

    def get(self, local_run_id: str) -> LocalRun:
        run = self.runs.get(local_run_id)
        if run is None:
            raise NotFoundError(
                f"Run '{local_run_id}' not found on runtime instance '{self.runtime_instance_id}'.",
                hint="Check the RunId.",
            )
        return run

    def known_attempt(self, request: LocalRunRequest) -> LocalRun | None:
        """The run this dispatch attempt already created (attempt ids are random, never reused)."""
        attempt_id = request.dispatch_attempt_id
        local_run_id = self._attempts.get(attempt_id) if attempt_id else None
        return self.runs.get(local_run_id) if local_run_id else None

    def add(self, run: LocalRun) -> None:
        """Keep an accepted run and queue it."""
        self.runs[run.record.local_run_id] = run
        if run.request.dispatch_attempt_id:
            self._attempts[run.request.dispatch_attempt_id] = run.record.local_run_id
        self.queued.append(run)

    def next_startable(self, max_running: int) -> LocalRun | None:
        """The oldest queued run, when the queue is not paused and a run slot is free."""
        if self.paused or not self.queued or len(self.running) >= max_running:
            return None
        return self.queued.popleft()

    def pause(self, *, reason: str, requested_by: str) -> None:
        self.paused, self.pause_reason, self.pause_requested_by = True, reason or None, requested_by or None

    def resume(self, *, requested_by: str) -> None:
        self.paused, self.pause_reason, self.pause_requested_by = False, None, requested_by or None

    def state(self) -> QueueStateView:
        return QueueStateView(
            runtime_instance_id=self.runtime_instance_id,
            paused=self.paused,
            reason=self.pause_reason,
            requested_by=self.pause_requested_by,
            queued=len(self.queued),
            running=len(self.running),
        )

    def parked_counts(self) -> Counter[str]:
        """Running runs parked now, by the control status they wait in (Paused, WaitingForInput)."""
        return Counter(
            run.parked for run in map(self.runs.get, self.running) if run is not None and run.parked
        )

    def live(self) -> list[LocalRun]:
        """The runs that have not ended."""
        return [run for run in self.runs.values() if not run.done.is_set()]

    def release(self, run: LocalRun) -> None:
        """Free the run's slot (its workers' permits went back with their last round)."""
        self.running.pop(run.record.local_run_id, None)
        self.wake.set()  # a queued run may take the freed slot

    def end(self, run: LocalRun) -> None:
        """The run ended: wake its waiters and keep it among the recently finished."""
        run.done.set()
        self._finished.append(run.record.local_run_id)
        while len(self._finished) > FINISHED_RUNS_KEPT:
            forgotten = self.runs.pop(self._finished.popleft(), None)
            if forgotten is not None and forgotten.request.dispatch_attempt_id:
                self._attempts.pop(forgotten.request.dispatch_attempt_id, None)
        self.wake.set()

    def abandon(self, run: LocalRun, reason: str) -> None:
        """The run is no longer this incarnation's: it ends here without any write."""
        run.mark_taken_over(reason)
        self.end(run)

    def drop_all(self, reason: str) -> None:
        """Abandon every queued run and cancel every running one (but the caller's own task)."""
        while self.queued:
            self.abandon(self.queued.popleft(), reason)
        current = asyncio.current_task()
        for task in self.running.values():
            if task is not current:
                task.cancel()
        self.wake.set()
