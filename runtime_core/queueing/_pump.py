"""The shared queue pump: one controlled dispatch cycle, callable from anywhere.

Owns the cycle loop: ask the dispatcher for attempts until the maximum dispatch count, no
claimable item, a failure (when `stop_on_failure`), cancellation, or until a run that
already failed in this cycle comes round again. Once a run finds no capacity, every other
run of its admission group would get the same answer in this cycle, so the rest of the
cycle passes over that group's items (they stay Pending in place, never claimed and
requeued one by one) while other tenants' runs still dispatch; the registry is read once
per cycle (see DispatchCycle), and runs the cycle claimed several at a time but did not get
to dispatch go back to Pending at their own place when it stops. The runs of one claim are
dispatched concurrently (their round trips shared), one at a time when the cycle stops at
the first failure. A cycle claims one run first (a tenant without capacity then costs one
claim, not a batch) unless an earlier cycle dispatched and none since met a group without
capacity. Reports each attempt to an optional progress callback.
Must not schedule itself (the background pump does) and must not claim or dispatch on its
own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from runtime_core.queueing._dispatcher import DispatchCycle, SharedQueueDispatcher
from runtime_core.queueing._models import (
    DispatchOutcome,
    DispatchResult,
    PumpRequest,
    PumpResult,
    PumpStopReason,
)

PumpProgress = Callable[[int, DispatchResult], Awaitable[None]]

_RETRY_LATER = (DispatchOutcome.NO_CAPACITY, DispatchOutcome.FAILED)


class SharedQueuePump:
    def __init__(self, dispatcher: SharedQueueDispatcher) -> None:
        self.dispatcher = dispatcher
        # A cycle dispatched, and no cycle since met an admission group without capacity: the
        # next one claims a batch from its first claim (see DispatchCycle.claim_size).
        self._warm = False

    async def pump(
        self,
        request: PumpRequest,
        *,
        cancel: asyncio.Event | None = None,
        progress: PumpProgress | None = None,
    ) -> PumpResult:
        cycle, dispatched = DispatchCycle(admitted=self._warm), False
        try:
            result = await self._cycle(request, cycle, cancel, progress)
            dispatched = bool(result.dispatched)
        finally:
            await self.dispatcher.hand_back(cycle)  # claimed with others, not dispatched
            self._warm = (self._warm or dispatched) and not cycle.saturated_groups
        return result.model_copy(update={"retry_after_ms": cycle.turns.rate_wait_ms})

    async def _cycle(
        self,
        request: PumpRequest,
        cycle: DispatchCycle,
        cancel: asyncio.Event | None,
        progress: PumpProgress | None,
    ) -> PumpResult:
        attempts: list[DispatchResult] = []
        not_dispatched: set[str] = set()
        while True:
            if cancel is not None and cancel.is_set():
                return PumpResult(attempts=attempts, stop_reason=PumpStopReason.CANCELLED)
            if len(attempts) >= request.max_dispatch_count:
                return PumpResult(attempts=attempts, stop_reason=PumpStopReason.MAX_COUNT)
            wanted = request.max_dispatch_count - len(attempts)
            # Stopping at the first failure: nothing may leave after it, so one run at a time.
            together = 1 if request.stop_on_failure else wanted
            results = await self.dispatcher.dispatch_batch(
                request.pump, cycle, wanted=wanted, together=together
            )
            if not results:
                # Out of capacity with nothing left Pending as far as the cycle saw: empty.
                waiting = cycle.saturated_groups or (cycle.out_of_capacity and not cycle.turns.none_pending)
                stop = PumpStopReason.NO_CAPACITY if waiting else PumpStopReason.EMPTY
                return PumpResult(attempts=attempts, stop_reason=stop)
            stops = [
                await self._record(result, attempts, cycle, request, not_dispatched, progress)
                for result in results
            ]
            stop = next((reason for reason in stops if reason is not None), None)
            if stop is not None:
                return PumpResult(attempts=attempts, stop_reason=stop)

    async def _record(
        self,
        result: DispatchResult,
        attempts: list[DispatchResult],
        cycle: DispatchCycle,
        request: PumpRequest,
        not_dispatched: set[str],
        progress: PumpProgress | None,
    ) -> PumpStopReason | None:
        """Count one attempt of the cycle; why the cycle stops after it, if it does."""
        attempts.append(result)
        if progress is not None:
            await progress(len(attempts), result)
        if result.outcome is DispatchOutcome.NO_CAPACITY and result.admission_group is not None:
            cycle.saturated_groups.add(result.admission_group)
        return self._stop_reason(result, request, not_dispatched)

    @staticmethod
    def _stop_reason(
        result: DispatchResult, request: PumpRequest, not_dispatched: set[str]
    ) -> PumpStopReason | None:
        if result.outcome is DispatchOutcome.FAILED and request.stop_on_failure:
            return PumpStopReason.FAILURE
        if result.outcome not in _RETRY_LATER or result.shared_run_id is None:
            return None
        if result.shared_run_id in not_dispatched:
            # Every pending run has had its chance in this cycle; stop instead of spinning.
            return PumpStopReason.NO_CAPACITY
        not_dispatched.add(result.shared_run_id)
        return None
