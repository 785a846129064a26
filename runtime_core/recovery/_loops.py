"""The background health and recovery loops of a control plane.

Owns running `RuntimeHealthReconciler.reconcile_once` and
`ExecutionRecoveryReconciler.reconcile_once` at their intervals; a health pass that marked
an instance Unsafe wakes recovery at once. While Redis is unavailable a loop backs off
(capped exponential, one structured warning per attempt) instead of dying; any other failing
pass is logged and retried on the next interval. Must not reconcile anything itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import StoreOutage
from runtime_core.recovery._health import RuntimeHealthReconciler
from runtime_core.recovery._reconciler import ExecutionRecoveryReconciler

log = logging.getLogger("runtime_core.recovery")

_HEALTH_LOOP = "runtime-health-reconciler"
_RECOVERY_LOOP = "execution-recovery-reconciler"


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=timeout_s)


class RecoveryLoops:
    def __init__(
        self,
        health: RuntimeHealthReconciler,
        recovery: ExecutionRecoveryReconciler,
        *,
        health_interval_ms: int,
        recovery_interval_ms: int,
    ) -> None:
        self.health = health
        self.recovery = recovery
        self.health_interval_ms = health_interval_ms
        self.recovery_interval_ms = recovery_interval_ms
        self._stop = asyncio.Event()
        self._wake_recovery = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._stop.clear()
        self._tasks = [
            asyncio.create_task(self._health_loop(), name=_HEALTH_LOOP),
            asyncio.create_task(self._recovery_loop(), name=_RECOVERY_LOOP),
        ]

    def alive(self) -> dict[str, bool]:
        """Each loop: started and not ended (readiness reads this)."""
        running = {task.get_name(): not task.done() for task in self._tasks}
        return {
            "health_reconciler": running.get(_HEALTH_LOOP, False),
            "recovery_reconciler": running.get(_RECOVERY_LOOP, False),
        }

    async def stop(self) -> None:
        self._stop.set()
        self._wake_recovery.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _health_loop(self) -> None:
        outage = StoreOutage("recovery.health_pass", logger=log)
        while not self._stop.is_set():
            try:
                if await self.health.reconcile_once():
                    self._wake_recovery.set()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception:  # a bug in one pass must not stop health checks: log, try next interval
                log.exception("health.reconcile_failed")
            else:
                outage.recovered()
            await _wait(self._stop, self.health_interval_ms / 1000)

    async def _recovery_loop(self) -> None:
        outage = StoreOutage("recovery.recovery_pass", logger=log)
        while not self._stop.is_set():
            self._wake_recovery.clear()
            try:
                await self.recovery.reconcile_once()
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            except Exception:  # a bug in one pass must not stop recovery: log, try next interval
                log.exception("recovery.reconcile_failed")
            else:
                outage.recovered()
            await _wait(self._wake_recovery, self.recovery_interval_ms / 1000)
