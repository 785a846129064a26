"""Cancelling the runs a cancel-in-progress concurrency key picked at a newer run's submit.

Owns `KeyEvictions`: each picked run (the key's oldest: queued, waiting or running) is
cancelled through the ordinary cancellation path under the submitter's snapshot (same
tenant), with the reason naming the newer run; a run a pump is dispatching right this moment
is tried again shortly, and a run that ended meanwhile needs nothing. A failure is logged,
never raised to the submit: the picked run then finishes normally and its slot goes back when
it ends (the newer run waits for it). Must not choose which runs to cancel: the queue script
does.
"""

from __future__ import annotations

import asyncio
import logging

from runtime_core.control_plane._cancellation import RunCanceller
from runtime_core.errors import ConflictError, NotFoundError, StoreUnavailableError
from runtime_core.identity import ExecutionContextSnapshot

log = logging.getLogger("runtime_core.control_plane")

_BUSY_RETRIES = 20
_BUSY_RETRY_S = 0.05
REASON = "replaced by a newer run of its concurrency key (cancel-in-progress)"


class KeyEvictions:
    def __init__(self, canceller: RunCanceller) -> None:
        self._canceller = canceller

    async def __call__(self, shared_run_ids: list[str], snapshot: ExecutionContextSnapshot) -> None:
        await asyncio.gather(*(self._cancel(shared_run_id, snapshot) for shared_run_id in shared_run_ids))

    async def _cancel(self, shared_run_id: str, snapshot: ExecutionContextSnapshot) -> None:
        for _ in range(_BUSY_RETRIES):
            try:
                await self._canceller.cancel(shared_run_id, snapshot, reason=REASON)
                return
            except ConflictError as busy:
                if "being dispatched" not in busy.message:
                    return  # it ended already: nothing left to cancel
            except (NotFoundError, StoreUnavailableError) as failed:
                log.warning(
                    "flow.eviction_failed shared_run_id=%s error=%s",
                    shared_run_id,
                    failed.code,
                    extra={"shared_run_id": shared_run_id, "tenant_id": snapshot.tenant_id},
                )
                return
            await asyncio.sleep(_BUSY_RETRY_S)  # a pump is dispatching it: cancel it once it is
        log.warning(
            "flow.eviction_gave_up shared_run_id=%s",
            shared_run_id,
            extra={"shared_run_id": shared_run_id, "tenant_id": snapshot.tenant_id},
        )
