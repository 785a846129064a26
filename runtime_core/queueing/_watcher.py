"""The scale-out watcher: observe pending scale-out requests and have a provider create capacity.

Owns handling each Pending request exactly once under its persisted snapshot: select a
scale-out capable provider (by hint), provision, record Fulfilled / Rejected, then hand the
shared run to the fulfilled-run requeue service; `run_forever` repeats that at an interval,
backing off (capped exponential, logged) while Redis is unavailable instead of dying. Never
dispatches a run itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from runtime_core.errors import RuntimeCoreError, StoreUnavailableError
from runtime_core.hot_state import StoreOutage
from runtime_core.identity import restored_snapshot
from runtime_core.providers import ProviderSelector, ScaleOutProvisionRequest, ScaleOutProvisionResult
from runtime_core.queueing._requeue import FulfilledRunRequeue
from runtime_core.queueing._scale_out import ScaleOutRequestRecord, ScaleOutRequestStore

log = logging.getLogger("runtime_core.queueing")


class ScaleOutWatcher:
    def __init__(
        self,
        store: ScaleOutRequestStore,
        providers: ProviderSelector,
        requeue: FulfilledRunRequeue,
        *,
        watcher_id: str = "scale-out-watcher",
    ) -> None:
        self.store = store
        self.providers = providers
        self.requeue = requeue
        self.watcher_id = watcher_id

    async def process_pending(self) -> list[ScaleOutRequestRecord]:
        handled = []
        for request_id in await self.store.pending_ids():
            record = await self.store.observe(request_id, self.watcher_id)
            if record is not None:
                handled.append(await self._handle(record))
        return handled

    async def _handle(self, record: ScaleOutRequestRecord) -> ScaleOutRequestRecord:
        with restored_snapshot(record.snapshot):
            result = await self._provision(record)
            if result.fulfilled and result.runtime_instance_id:
                record = await self.store.fulfill(record, result.runtime_instance_id, result.reason)
            else:
                record = await self.store.reject(record, result.reason)
            # Fulfilled or not, the run waits in the shared queue: the pump owns dispatch.
            await self.requeue.requeue(record.shared_run_id)
        return record

    async def _provision(self, record: ScaleOutRequestRecord) -> ScaleOutProvisionResult:
        try:
            provider = self.providers.for_scale_out(record.provider_hint)
            return await provider.scale_out(
                ScaleOutProvisionRequest(
                    request_id=record.request_id,
                    tenant_settings=record.tenant_settings,
                    snapshot=record.snapshot,
                )
            )
        except RuntimeCoreError as exc:
            return ScaleOutProvisionResult(fulfilled=False, reason=exc.message)

    async def run_forever(self, stop: asyncio.Event, *, interval_ms: int = 200) -> None:
        outage = StoreOutage("scale_out.watch", logger=log, watcher_id=self.watcher_id)
        while not stop.is_set():
            try:
                await self.process_pending()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception:  # a bug in one pass must not stop the watcher: log, try next interval
                log.exception("scale_out.watch_failed")
            else:
                outage.recovered()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_ms / 1000)
