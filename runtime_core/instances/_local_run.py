"""One local run as its runtime instance holds it, and how it ends.

Owns `LocalRun` (the request, the record as shown and as last written, its engine worker
count and the events the controller signals), `TakenOver` (the run is no longer this incarnation's:
recovery sealed it, the incarnation was fenced, or its ExecutionId was given up) and the
mapping of what `DagEngine.run` returned to the local run's end. Must not write anything.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from runtime_core.dag import SUPERSEDED_STATUS
from runtime_core.errors import NotFoundError
from runtime_core.identity import ExecutionContextSnapshot, new_execution_id
from runtime_core.instances._models import LocalRunRequest, LocalRunStatus, LocalRunView
from runtime_core.instances._run_index import RunIndexRecord


class TakenOver(Exception):
    """This incarnation may no longer act on a local run: recovery sealed its record, the
    incarnation was fenced, or its ExecutionId was given up. The run continues elsewhere."""


@dataclass
class LocalRun:
    request: LocalRunRequest
    # `record` is what `view()` shows; `stored` is the record as this incarnation last wrote it
    # (the expected revision of its next compare-and-set).
    record: RunIndexRecord
    stored: RunIndexRecord
    # The dataset epoch this run last saw its hot state in.
    epoch: str
    # Engine workers the run advances its execution with once started (at most that many of
    # its steps run at once; each holds one of the instance's worker permits only while it
    # runs steps); 0 before it started.
    effective_workers: int = 0
    cancel_requested: bool = False
    # Set once its execution exists (created, or the resumed one reassigned to it).
    opened: bool = False
    fresh_execution_id: str = field(default_factory=new_execution_id)
    # The control status its execution is parked in (Paused, WaitingForInput) while the driver
    # waits for it to be unparked; None while it advances (what the parked-runs gauges count).
    parked: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # Held while the record is written (a swap, or a rewrite after a lost dataset).
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def snapshot(self) -> ExecutionContextSnapshot:
        assert self.request.snapshot is not None
        return self.request.snapshot

    @property
    def execution_id(self) -> str:
        """The resumed ExecutionId, or the new one chosen once for this run: it is recorded
        (start) before the DAG is created, so recovery always knows which ExecutionId a run
        holds and a retried creation never makes a second DAG."""
        return self.request.resume_execution_id or self.fresh_execution_id

    def mark_taken_over(self, reason: str) -> None:
        """Show the run as failed here: it continues elsewhere (nothing is written)."""
        self.record = self.record.model_copy(
            update={"status": LocalRunStatus.FAILED, "failure_reason": f"taken over: {reason}"}
        )

    def view(self) -> LocalRunView:
        r = self.record
        return LocalRunView(
            local_run_id=r.local_run_id,
            shared_run_id=r.shared_run_id,
            runtime_instance_id=r.runtime_instance_id,
            status=r.status,
            execution_id=r.execution_id,
            effective_workers=self.effective_workers,
            failure_reason=r.failure_reason,
            created_at_ms=r.created_at_ms,
            started_at_ms=r.started_at_ms,
            completed_at_ms=r.completed_at_ms,
        )


def run_outcome(final: str, execution_id: str) -> tuple[LocalRunStatus, str | None]:
    """The local run's end from the status `DagEngine.run` returned."""
    if final == SUPERSEDED_STATUS:
        raise TakenOver(f"execution '{execution_id}' was taken over by another local run")
    if final in (LocalRunStatus.COMPLETED, LocalRunStatus.CANCELLED):
        return LocalRunStatus(final), None
    return LocalRunStatus.FAILED, f"execution finished {final or 'without a status'}"


def resume_target_missing(execution_id: str) -> NotFoundError:
    return NotFoundError(
        f"Execution '{execution_id}' to resume was not found.",
        hint="Its hot state is gone; replay it from its terminal snapshot.",
    )
