"""The shared queue dispatcher: one dispatch attempt for the next Pending shared run.

Owns the order read the registry once per cycle (no claim when no run could be assigned) ->
claim (passing over the cycle's saturated admission groups; one call claims as many runs as
the cycle can still dispatch into free slots, up to CLAIM_BATCH) -> load
the runs (one pipelined read) -> restore each one's ExecutionContextSnapshot -> re-admit at
dispatch time (against the cycle's registry listing) -> deliver (reserve, provider, mark;
the runs of one claim concurrently, so their calls share round trips: `dispatch_batch`)
and the item's fate when it does not dispatch (back to Pending at its own place when there
is no capacity, at the tail when delivery failed, or Failed when its run / snapshot is
missing). The previous context is restored, or cleared, after every attempt. An item whose
earlier claim lapsed (its pump died mid-dispatch) has that claim's dispatch attempt settled
first: a run an instance had already accepted is recorded as dispatched instead of being
dispatched again. Also owns `DispatchCycle`, what one pump cycle's attempts share. Once a
provider accepted a run, recording it as Dispatched is retried through a Redis outage for
as long as this pump's claim lease is exclusive, so another pump cannot dispatch the same
run again; past it, the claim is left as it is (never requeued: an instance holds the run)
while the recording goes on in the background. Must not execute steps or touch DAG state.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field

from runtime_core.errors import StoreUnavailableError
from runtime_core.events import RunEventSubscriber
from runtime_core.hot_state import retry_while_unavailable
from runtime_core.identity import restored_snapshot
from runtime_core.instances import AdmissionController, AdmissionKind, InstanceEntry, admission_group
from runtime_core.queueing._busy_listing import BusyListing
from runtime_core.queueing._delivery import RunDelivery
from runtime_core.queueing._models import (
    DispatchOutcome,
    DispatchResult,
    PumpIdentity,
    QueueClaim,
    SharedRunRecord,
)
from runtime_core.queueing._queue import QueueTransition, SharedQueue
from runtime_core.queueing._recording import RecordingInDoubtError
from runtime_core.queueing._run_store import SharedRunStore
from runtime_core.queueing._turns import PartitionTurns

log = logging.getLogger("runtime_core.queueing")

CLAIM_BATCH = 16
"""Most runs one claim takes (see `DispatchCycle.claim_size`)."""


@dataclass
class DispatchCycle:
    """What one pump cycle learned so far, so later attempts in it need fewer reads.

    `saturated_groups`: admission groups that found no capacity (their items are passed
    over). `registry_entries`: the registry listing read before the cycle's first claim,
    with the slots this cycle's own dispatches took subtracted (as each run is admitted,
    before it is delivered), so ranking spreads the runs of a batch over instances.
    Reservations re-check published capacity in Lua, so a listing that went stale can cost
    a refused reservation, never an over-commit.
    `turns`: the cycle's view of the queue partitions' queues (what its claims take).
    `claimed`: runs claimed in one call (with their records) and not dispatched yet; the
    cycle's owner hands them back (`SharedQueueDispatcher.hand_back`) when it stops early.
    `out_of_capacity`: the listing showed no free slot any run could take, so the cycle
    claimed nothing more (a run the dispatcher cannot assign goes back to the queue whatever
    admission decided: scale-out is requested at submit and by recovery, not here).
    `admitted`: an admission decided in this cycle (or the pump's last cycle assigned every
    run it met: then its first claim is a batch too).
    """

    saturated_groups: set[str] = field(default_factory=set)
    out_of_capacity: bool = False
    admitted: bool = False
    turns: PartitionTurns = field(default_factory=PartitionTurns)
    claimed: deque[tuple[QueueClaim, SharedRunRecord | None]] = field(default_factory=deque)

    def claim_size(self, wanted: int) -> int:
        """How many runs the next claim takes: at most `wanted` and the free run slots the
        cycle's registry listing shows, at most CLAIM_BATCH; 1 until an admission decided (a
        tenant without visible capacity then has one run claimed and put back, not a batch),
        unless the cycle started `admitted`."""
        if not self.admitted:
            return 1
        free = sum(e.free_slots for e in self.registry_entries or () if e.eligible)
        return max(1, min(wanted, free, CLAIM_BATCH))

    registry_entries: list[InstanceEntry] | None = None

    def took_slot(self, runtime_instance_id: str) -> None:
        if self.registry_entries is None:
            return
        self.registry_entries = [
            e.model_copy(update={"reserved_slots": e.reserved_slots + 1})
            if e.runtime_instance_id == runtime_instance_id
            else e
            for e in self.registry_entries
        ]


class SharedQueueDispatcher:
    def __init__(
        self,
        runs: SharedRunStore,
        queue: SharedQueue,
        admission: AdmissionController,
        delivery: RunDelivery,
        *,
        capacity_signals: RunEventSubscriber | None = None,
    ) -> None:
        """`capacity_signals`: where freed capacity is heard; with it, a listing that showed no
        free slot is reused by the next cycles until capacity is freed (see BusyListing)."""
        self.runs = runs
        self.queue = queue
        self.admission = admission
        self.delivery = delivery
        self.busy = BusyListing(capacity_signals) if capacity_signals is not None else None

    async def dispatch_next(
        self, pump: PumpIdentity, cycle: DispatchCycle | None = None, *, wanted: int = 1
    ) -> DispatchResult:
        """Dispatch the oldest Pending run outside the cycle's saturated groups (EMPTY: none).

        `wanted`: how many more runs the caller means to dispatch in this cycle; a claim takes
        up to that many at once (see `DispatchCycle.claim_size`) and keeps the rest in the
        cycle for the next calls."""
        cycle = cycle or DispatchCycle()
        batch = await self._next_claimed(pump, cycle, wanted, 1)
        if not batch:
            return DispatchResult(outcome=DispatchOutcome.EMPTY, reason="no pending shared run")
        return await self._dispatch_or_requeue(*batch[0], cycle)

    async def dispatch_batch(
        self, pump: PumpIdentity, cycle: DispatchCycle, *, wanted: int, together: int
    ) -> list[DispatchResult]:
        """Dispatch up to `together` claimed runs concurrently (claims sized by `wanted`, as in
        `dispatch_next`), so their reservations, instance acceptances and marks share round
        trips; their results in claim order, [] when no run is pending outside the saturated
        groups. When one raises, the others still finish, and the first error is raised (every
        failed run is requeued)."""
        batch = await self._next_claimed(pump, cycle, wanted, together)
        outcomes = await asyncio.gather(
            *(self._dispatch_or_requeue(claim, run, cycle) for claim, run in batch), return_exceptions=True
        )
        errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if errors:
            raise errors[0]
        return [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]

    async def _next_claimed(
        self, pump: PumpIdentity, cycle: DispatchCycle, wanted: int, most: int
    ) -> list[tuple[QueueClaim, SharedRunRecord | None]]:
        """Up to `most` claimed runs outside the saturated groups, claiming when none is left;
        claimed runs of a group that found no capacity meanwhile go back in place."""
        batch: list[tuple[QueueClaim, SharedRunRecord | None]] = []
        while len(batch) < most:
            if not cycle.claimed and (batch or not await self._claim(pump, cycle, wanted)):
                break
            claim, run = cycle.claimed.popleft()
            if run is not None and run.snapshot is not None:
                if admission_group(run.snapshot) in cycle.saturated_groups:
                    await self.queue.requeue_in_place(claim, "its admission group has no capacity now")
                    continue
            batch.append((claim, run))
        return batch

    async def _dispatch_or_requeue(
        self, claim: QueueClaim, run: SharedRunRecord | None, cycle: DispatchCycle
    ) -> DispatchResult:
        try:
            return await self._dispatch_claimed(claim, run, cycle)
        except RecordingInDoubtError:
            raise  # an instance holds the run: its claim stays as it is (recorded, or settled once lapsed)
        except Exception as exc:
            await self._requeue_after_error(claim, exc)
            raise

    async def _claim(self, pump: PumpIdentity, cycle: DispatchCycle, wanted: int) -> bool:
        """Claim the next runs and read their records (one call each); False: none left, or
        no capacity any run could take (nothing is claimed then: claiming a run only to put it
        back costs three round trips, and a drain finding the instances busy costs no more
        than reading the registry)."""
        if cycle.registry_entries is None:
            cycle.registry_entries = await self._listing()
        if not self.admission.may_assign(cycle.registry_entries):
            cycle.out_of_capacity = True
            return False
        claims = await self.queue.claim_batch(
            pump, frozenset(cycle.saturated_groups), cycle.turns, limit=cycle.claim_size(wanted)
        )
        if not claims:
            return False
        try:
            runs = await self.runs.get_many([claim.shared_run_id for claim in claims])
        except Exception as exc:
            for claim in claims:
                await self._requeue_after_error(claim, exc)
            raise
        cycle.claimed.extend(zip(claims, runs, strict=True))
        return True

    async def _listing(self) -> list[InstanceEntry]:
        """The registry listing a cycle starts from: the busy one kept, or read now."""
        if self.busy is None:
            return await self.admission.registry.entries()
        kept = self.busy.get()
        if kept is not None:
            return kept
        generation = self.busy.generation
        entries = await self.admission.registry.entries()
        if not self.admission.may_assign(entries):
            self.busy.keep(entries, generation)
        return entries

    async def hand_back(self, cycle: DispatchCycle) -> None:
        """Runs the cycle claimed but did not dispatch go back to Pending at their own place
        (with Redis down their claims lapse instead, and the next claimer takes them)."""
        while cycle.claimed:
            claim, _ = cycle.claimed.popleft()
            try:
                await self.queue.requeue_in_place(claim, "not dispatched in its pump cycle")
            except StoreUnavailableError:
                log.warning("dispatch.hand_back_deferred", extra={"shared_run_id": claim.shared_run_id})

    async def _requeue_after_error(self, claim: QueueClaim, exc: Exception) -> None:
        """Back to Pending; with Redis down the claim lease expires and frees the item instead."""
        try:
            await self.queue.requeue(claim, f"dispatcher error: {type(exc).__name__}")
        except StoreUnavailableError:
            log.warning(
                "dispatch.requeue_deferred shared_run_id=%s",
                claim.shared_run_id,
                extra={"shared_run_id": claim.shared_run_id, "claim_lease_ms": self.queue.claim_lease_ms},
            )

    async def _mark_dispatched(self, claim: QueueClaim, fields: dict[str, str]) -> QueueTransition:
        """The run sits in a local queue already: record it while the claim is still ours (past
        the claim lease the recording goes on in the background: DispatchRecording)."""
        return await retry_while_unavailable(
            lambda: self.queue.mark_dispatched(claim.shared_run_id, claim.token, fields),
            "dispatch.mark_dispatched",
            give_up_after_s=self.queue.claim_lease_ms / 1000,
            logger=log,
            shared_run_id=claim.shared_run_id,
        )

    async def _dispatch_claimed(
        self, claim: QueueClaim, run: SharedRunRecord | None, cycle: DispatchCycle
    ) -> DispatchResult:
        if run is None or run.snapshot is None:
            reason = (
                "shared run record missing" if run is None else "shared run has no ExecutionContextSnapshot"
            )
            await self.queue.abandon(claim, reason)
            return DispatchResult(
                outcome=DispatchOutcome.ABANDONED, shared_run_id=claim.shared_run_id, reason=reason
            )
        base = {
            "shared_run_id": run.shared_run_id,
            "tenant_id": run.tenant_id,
            "admission_group": admission_group(run.snapshot),
        }
        if claim.unsettled:
            accepted = await self.delivery.settle_earlier_attempts(run, claim.unsettled)
            if accepted is not None:
                recorded = await self.delivery.record_accepted(
                    run, accepted, lambda fields: self._mark_dispatched(claim, fields), claim.pump
                )
                return DispatchResult(
                    outcome=recorded.outcome,
                    assigned_runtime_instance_id=recorded.runtime_instance_id,
                    local_run_id=recorded.local_run_id,
                    reason=recorded.reason,
                    **base,
                )
        with restored_snapshot(run.snapshot):
            decision = await self.admission.admit(run.snapshot, cycle.registry_entries)
            cycle.admitted = True
            if decision.kind is not AdmissionKind.ASSIGN_TO_INSTANCE:
                reason = f"{decision.kind.value}: {decision.reason}"
                await self.queue.requeue_in_place(claim, reason)
                return DispatchResult(outcome=DispatchOutcome.NO_CAPACITY, reason=reason, **base)
            # Counted now, before the delivery awaits anything: the next run of the batch is
            # admitted against what is left, so a batch spreads over the instances instead of
            # every run reserving the same one first.
            first_choice = decision.candidates[0].runtime_instance_id
            cycle.took_slot(first_choice)
            delivery = await self.delivery.deliver(
                run,
                decision,
                lambda fields: self._mark_dispatched(claim, fields),
                claim.pump,
                attempt_id=claim.token,
            )
        delivered_to = delivery.runtime_instance_id
        if delivery.outcome is DispatchOutcome.DISPATCHED and delivered_to and delivered_to != first_choice:
            cycle.took_slot(delivered_to)  # the first choice was full (its slot stays counted)
        if delivery.outcome in (DispatchOutcome.NO_CAPACITY, DispatchOutcome.FAILED):
            no_capacity = delivery.outcome is DispatchOutcome.NO_CAPACITY
            requeue = self.queue.requeue_in_place if no_capacity else self.queue.requeue
            await requeue(claim, delivery.reason)
            await self.delivery.journal.record(run, "requeued", reason=delivery.reason)
        return DispatchResult(
            outcome=delivery.outcome,
            assigned_runtime_instance_id=delivery.runtime_instance_id,
            local_run_id=delivery.local_run_id,
            reason=delivery.reason,
            **base,
        )
