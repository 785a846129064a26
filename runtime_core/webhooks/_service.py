"""WebhookService: the background fan-out and delivery loops of one control-plane process.

Owns starting and stopping the two loops (fan-out: run-event stream -> outbox; delivery:
outbox -> HTTP) and their pacing: the fan-out blocks on the stream, the delivery loop sleeps
until the next delivery is due (at most `idle_interval_ms`) or the fan-out wakes it. A Redis
outage backs both off and they carry on; nothing the run does waits for them. Any number of
control planes may run it on one Redis: leases and the consumer group share the work.
Refuses to start when a configured secret variable is missing. Must not decide targets or
outcomes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import httpx

from runtime_core.errors import RuntimeCoreError
from runtime_core.hot_state import HotState
from runtime_core.queueing import SharedRunStore
from runtime_core.webhooks._config import WebhookSettings
from runtime_core.webhooks._delivery import DeliveryMetrics, WebhookDeliverer
from runtime_core.webhooks._fanout import WebhookFanout
from runtime_core.webhooks._outbox import WebhookOutbox

log = logging.getLogger("runtime_core.webhooks")

_FANOUT_BLOCK_MS = 1_000
_MIN_SLEEP_S = 0.005


class WebhookConfigError(RuntimeCoreError):
    code = "invalid_configuration"


class WebhookService:
    def __init__(
        self,
        hot_state: HotState,
        settings: WebhookSettings,
        runs: SharedRunStore,
        *,
        consumer: str,
        metrics: DeliveryMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.hot_state = hot_state
        self.outbox = WebhookOutbox(hot_state, settings.delivery)
        self.fanout = WebhookFanout(hot_state, settings, self.outbox, runs, consumer=consumer)
        self._client = httpx.AsyncClient(follow_redirects=False)
        self.deliverer = WebhookDeliverer(self.outbox, settings.delivery, self._client, metrics)
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> WebhookService:
        missing = self.settings.missing_secrets()
        if missing:
            raise WebhookConfigError(
                f"webhook signing secrets are not set: {', '.join(missing)}.",
                hint="Export every variable the tenant settings file names in secretEnv / callbackSecretEnv.",
            )
        await self.fanout.ensure_group()
        self._tasks = [
            asyncio.create_task(self._forever("webhook.fanout", self._fan_out), name="webhook-fanout"),
            asyncio.create_task(self._forever("webhook.delivery", self._deliver), name="webhook-delivery"),
        ]
        return self

    def loops_alive(self) -> dict[str, bool]:
        """The fan-out and delivery loops (readiness): alive or not; both expected once started."""
        names = ("webhook_fanout", "webhook_delivery")
        if not self._tasks:
            return dict.fromkeys(names, False)
        return {name: not task.done() for name, task in zip(names, self._tasks, strict=True)}

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self._client.aclose()

    async def _fan_out(self) -> None:
        if await self.fanout.process(block_ms=_FANOUT_BLOCK_MS):
            self._wake.set()

    async def _deliver(self) -> None:
        if await self.deliverer.deliver_due():
            return
        next_due = await self.outbox.next_due_ms()
        idle_s = self.settings.delivery.idle_interval_ms / 1000
        wait_s = idle_s
        if next_due is not None:
            wait_s = min(idle_s, max(_MIN_SLEEP_S, (next_due - await self.hot_state.server_time_ms()) / 1000))
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), wait_s)

    @staticmethod
    async def _forever(name: str, step: Callable[[], Awaitable[None]]) -> None:
        delay = 0.05
        while True:
            try:
                await step()
                delay = 0.05
            except Exception as exc:  # a loop must outlive outages and bad records; log and back off
                log.warning(f"{name}_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 2)
