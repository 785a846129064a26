"""The fulfilled-run requeue service: put a ScaleOutRequested shared run back in the queue.

Owns the one transition ScaleOutRequested -> QueuedGlobally (item Pending) after a
scale-out request was handled, so the normal pump dispatches the run with the same
guarantees as any queued run. Must not dispatch.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime_core.queueing._models import SharedRunStatus
from runtime_core.queueing._queue import QueueOutcome, QueueTransition, SharedQueue
from runtime_core.queueing._run_store import SharedRunStore


class FulfilledRunRequeue:
    def __init__(
        self, runs: SharedRunStore, queue: SharedQueue, *, on_requeued: Callable[[], None] | None = None
    ) -> None:
        self.runs = runs
        self.queue = queue
        self.on_requeued = on_requeued

    async def requeue(self, shared_run_id: str) -> QueueTransition:
        record = await self.runs.get(shared_run_id)
        if record is None:
            return QueueTransition(QueueOutcome.MISSING, 0)
        result = await self.queue.enqueue_existing(record, (SharedRunStatus.SCALE_OUT_REQUESTED,))
        if result.applied and self.on_requeued is not None:
            self.on_requeued()
        return result
