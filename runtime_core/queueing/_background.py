"""The readiness gate and the background pump loop.

Owns waiting until runtime capacity is visible (at least one live instance that can accept
a run) before the first automatic dispatch, and the loop that runs pump cycles, idling
until woken (new work submitted in this process or queued by any process, heard as a
`run.queued` / `run.requeued` run event: an agent's child run submitted in a runtime-instance
process; capacity freed in this process, or on any runtime instance, heard on the capacity
channel) or a poll interval passes when a cycle dispatched nothing, and backing off
(capped exponential, logged) while Redis is unavailable instead of dying. Must not
dispatch itself: every cycle goes through the pump.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from runtime_core.errors import StoreUnavailableError
from runtime_core.events import RunEvent, RunEventSubscriber, RunEventType
from runtime_core.hot_state import StoreOutage
from runtime_core.instances import InstanceRegistry
from runtime_core.queueing._models import PumpIdentity, PumpRequest, PumpStopReason
from runtime_core.queueing._pump import SharedQueuePump

log = logging.getLogger("runtime_core.queueing")
_NEW_WORK = frozenset({RunEventType.QUEUED, RunEventType.REQUEUED})


async def _wait_event(event: asyncio.Event, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=timeout_s)


class ReadinessGate:
    """Passes once a registered, live runtime instance publishes `can_accept_run`."""

    def __init__(self, registry: InstanceRegistry, *, poll_interval_ms: int = 100) -> None:
        self.registry = registry
        self.poll_interval_ms = poll_interval_ms
        self.checks = 0

    async def is_ready(self) -> bool:
        self.checks += 1
        return any(entry.live and entry.capacity.can_accept_run for entry in await self.registry.entries())

    async def wait_ready(self, stop: asyncio.Event) -> bool:
        """True once ready; False when `stop` is set first. Redis outages only delay it."""
        outage = StoreOutage("pump.readiness", logger=log)
        while not stop.is_set():
            try:
                ready = await self.is_ready()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            outage.recovered()
            if ready:
                return True
            await _wait_event(stop, self.poll_interval_ms / 1000)
        return False


class BackgroundPump:
    def __init__(
        self,
        pump: SharedQueuePump,
        gate: ReadinessGate,
        identity: PumpIdentity,
        *,
        batch_size: int = 50,
        idle_interval_ms: int = 200,
        capacity_signals: RunEventSubscriber | None = None,
    ) -> None:
        """`capacity_signals`: the control plane's capacity subscriber (its dispatcher's too),
        closed by `stop`."""
        self.pump = pump
        self.gate = gate
        self.identity = identity
        self.batch_size = batch_size
        self.idle_interval_ms = idle_interval_ms
        self.gate_passed = False
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.capacity_signals = capacity_signals
        self._unsubscribes: list[Callable[[], None]] = []
        # Cycles run so far and how the last one stopped (None: it failed).
        self.cycles = 0
        self.last_stop: PumpStopReason | None = None
        self._idling = False

    def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.create_task(self._loop(), name=f"pump:{self.identity.claimer}")
        if self.capacity_signals is not None and not self._unsubscribes:
            signals = self.capacity_signals
            self._unsubscribes = [
                signals.on_capacity(lambda _instance_id: self.wake()),
                signals.listen(self._queued),
            ]

    @property
    def alive(self) -> bool:
        """Started and its loop has not ended (readiness reads this)."""
        return self._task is not None and not self._task.done()

    @property
    def idle(self) -> bool:
        """Waiting between cycles with no wake-up pending: every wake-up so far was followed by
        a cycle that started after it."""
        return self._idling and not self._wake.is_set()

    def _queued(self, event: RunEvent) -> None:
        if event.type in _NEW_WORK:
            self.wake()

    def wake(self) -> None:
        """New work or capacity: run the next cycle now instead of after the idle interval."""
        self._wake.set()

    async def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        self._unsubscribes = []
        if self.capacity_signals is not None:  # the dispatcher may listen on it too
            await self.capacity_signals.aclose()

    async def _loop(self) -> None:
        if not await self.gate.wait_ready(self._stop):
            return
        self.gate_passed = True
        request = PumpRequest(max_dispatch_count=self.batch_size, pump=self.identity)
        outage = StoreOutage("pump.cycle", logger=log, pump=self.identity.claimer)
        while not self._stop.is_set():
            self._wake.clear()
            try:
                result = await self.pump.pump(request, cancel=self._stop)
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception:  # a bug in one cycle must not stop the pump: log, idle, try again
                log.exception("pump.cycle_failed")
                result = None
            else:
                outage.recovered()
            self.cycles += 1
            self.last_stop = result.stop_reason if result is not None else None
            if result is None or not result.dispatched:
                idle_ms = self.idle_interval_ms
                if result is not None and result.retry_after_ms is not None:
                    idle_ms = min(idle_ms, result.retry_after_ms)  # a dispatch rate limit conforms
                self._idling = True
                await _wait_event(self._wake, idle_ms / 1000)
                self._idling = False
