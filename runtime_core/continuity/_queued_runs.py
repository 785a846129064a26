"""QueuedRunCopies: the durable copy of every shared run's request, and the requeue of the runs
that were only queued when Redis lost its dataset.

Owns `keep` (a submitted run's request goes to the durable store's submitted runs; a failing
write is logged and the submit stands: only the copy is missing; the lifecycle archiver drops
the copy when it archives the run) and `requeue_lost`: after a lost dataset (and a grace in
which runtime instances restore the runs they hold and other control planes flush their
ledgers), every copy whose shared run record is gone from Redis is looked up in the durable
ledger. A run whose last queue event says it was waiting in the queue (submitted, queued,
requeued, scale-out requested) is queued again under its own SharedRunId; a run that left the
queue (dispatched, rejected, cancelled) is left to its runtime instance or its durable record,
never run twice. Each requeued run gets a `requeued` forensics record (the recovery report).
Creation is atomic in Redis, so several control planes requeueing at once create each run
once. Must not dispatch, nor touch runs whose record survived.
"""

from __future__ import annotations

import logging
from collections import Counter
from enum import StrEnum

from runtime_core.audit import ForensicsRecorder, LedgerRecorder
from runtime_core.continuity._evidence import REQUEUED, LostRunEvidence
from runtime_core.hot_state import dataset_epoch
from runtime_core.queueing import (
    QueueOutcome,
    SharedQueue,
    SharedRunJournal,
    SharedRunRecord,
    SharedRunStore,
)
from runtime_core.storage import DurableStore, SubmittedRun

log = logging.getLogger("runtime_core.continuity")

HOT_STATE_LOST_REQUEUE_REASON = "requeued from its durable copy after Redis lost its dataset"
_PAGE = 500
# The ledger events that put a run into the shared queue, and those that took it out.
_IN_QUEUE = frozenset({"submitted", "queued", "requeued", "scale_out_requested"})
_LEFT_QUEUE = frozenset({"dispatched", "rejected", "cancelled"})


class LostRunOutcome(StrEnum):
    PRESENT = "present"  # its record survived, or an instance / another control plane restored it
    ARCHIVED = "archived"  # it had ended and was archived: the copy was stale
    LEFT_QUEUE = "left_queue"  # dispatched (its instance restores it) or ended before dispatch
    REQUEUED = "requeued"


class QueuedRunCopies:
    def __init__(
        self,
        store: DurableStore,
        runs: SharedRunStore,
        queue: SharedQueue,
        ledger: LedgerRecorder,
        journal: SharedRunJournal,
    ) -> None:
        self.store = store
        self.runs = runs
        self.queue = queue
        self.ledger = ledger
        self.journal = journal

    async def keep(self, record: SharedRunRecord) -> None:
        copy = SubmittedRun(
            shared_run_id=record.shared_run_id,
            tenant_id=record.tenant_id,
            run=record.model_dump(mode="json"),
        )
        try:
            await self.store.put_submitted_run(copy)
        except Exception as exc:  # the run exists in Redis; only its loss protection is missing
            log.warning(
                "shared_run.copy_not_kept shared_run_id=%s: %s",
                record.shared_run_id,
                exc,
                extra={"shared_run_id": record.shared_run_id, "tenant_id": record.tenant_id},
            )

    async def requeue_lost(self) -> Counter[LostRunOutcome]:
        """Settle every kept copy once (see the module docstring); the count per outcome."""
        await self.ledger.flush()  # this process's own queue events are read back below
        outcomes: Counter[LostRunOutcome] = Counter()
        after: str | None = None
        while page := await self.store.list_submitted_runs(after, limit=_PAGE):
            present = await self.runs.existing([copy.shared_run_id for copy in page])
            outcomes[LostRunOutcome.PRESENT] += len(present)
            for copy in page:
                if copy.shared_run_id not in present:
                    outcomes[await self._settle(copy)] += 1
            after = page[-1].shared_run_id
        if outcomes[LostRunOutcome.REQUEUED]:
            log.warning(
                "shared_run.requeued_after_hot_state_loss count=%d",
                outcomes[LostRunOutcome.REQUEUED],
                extra={"outcomes": dict(outcomes)},
            )
        return outcomes

    async def _settle(self, copy: SubmittedRun) -> LostRunOutcome:
        """A copy whose run record was missing when its page was read."""
        if await self.runs.get(copy.shared_run_id) is not None:  # created meanwhile
            return LostRunOutcome.PRESENT
        if await self.store.find_run_record(copy.tenant_id, shared_run_id=copy.shared_run_id) is not None:
            await self.store.delete_submitted_run(copy.tenant_id, copy.shared_run_id)  # stale copy
            return LostRunOutcome.ARCHIVED
        if not await self._was_waiting_in_the_queue(copy):
            return LostRunOutcome.LEFT_QUEUE
        return await self._requeue(SharedRunRecord.model_validate(copy.run))

    async def _was_waiting_in_the_queue(self, copy: SubmittedRun) -> bool:
        """Whether the last queue event of the run's durable ledger put it in the queue."""
        entries = await self.store.list_ledger(copy.tenant_id, shared_run_id=copy.shared_run_id)
        last = [
            event
            for entry in entries
            if (event := entry.event.removeprefix("shared_run.")) in _IN_QUEUE | _LEFT_QUEUE
        ]
        return not last or last[-1] in _IN_QUEUE

    async def _requeue(self, record: SharedRunRecord) -> LostRunOutcome:
        """Create the run again, QueuedGlobally with a Pending item (its request as submitted)."""
        queued = await self.queue.enqueue_new(record)
        if queued.outcome is not QueueOutcome.APPLIED:
            return LostRunOutcome.PRESENT  # another control plane requeued it first
        await self.journal.record(record, "requeued", reason=HOT_STATE_LOST_REQUEUE_REASON)
        await LostRunEvidence(ForensicsRecorder(self.store)).record(
            record.snapshot,
            REQUEUED,
            epoch=await dataset_epoch(self.runs.hot_state),
            runtime_instance_id="",
            shared_run_id=record.shared_run_id,
            reason=HOT_STATE_LOST_REQUEUE_REASON,
        )
        return LostRunOutcome.REQUEUED
