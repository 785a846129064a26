"""The shared queue pump: one controlled dispatch cycle, callable from anywhere.

Owns the cycle loop: ask the dispatcher for attempts until the maximum dispatch count, an
empty queue, a failure (when `stop_on_failure`), cancellation, or until a run that already
failed or found no capacity in this cycle comes round again (a manual drain tries every
pending run once) or, with `stop_at_no_capacity` (the background pump), at the first run
that finds no capacity, so a saturated pump does not claim and requeue the whole queue
every cycle. Reports each attempt to an optional progress callback. Must not schedule
itself (the background pump does) and must not claim or dispatch on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from runtime_core.queueing._dispatcher import SharedQueueDispatcher
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

    async def pump(
        self,
        request: PumpRequest,
        *,
        cancel: asyncio.Event | None = None,
        progress: PumpProgress | None = None,
        stop_at_no_capacity: bool = False,
    ) -> PumpResult:
        attempts: list[DispatchResult] = []
        not_dispatched: set[str] = set()
        while True:
            if cancel is not None and cancel.is_set():
                return PumpResult(attempts=attempts, stop_reason=PumpStopReason.CANCELLED)
            if len(attempts) >= request.max_dispatch_count:
                return PumpResult(attempts=attempts, stop_reason=PumpStopReason.MAX_COUNT)
            result = await self.dispatcher.dispatch_next(request.pump)
            if result.outcome is DispatchOutcome.EMPTY:
                return PumpResult(attempts=attempts, stop_reason=PumpStopReason.EMPTY)
            attempts.append(result)
            if progress is not None:
                await progress(len(attempts), result)
            if stop_at_no_capacity and result.outcome is DispatchOutcome.NO_CAPACITY:
                return PumpResult(attempts=attempts, stop_reason=PumpStopReason.NO_CAPACITY)
            stop = self._stop_reason(result, request, not_dispatched)
            if stop is not None:
                return PumpResult(attempts=attempts, stop_reason=stop)

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
