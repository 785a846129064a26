"""Scheduling: the schedule service and this control plane's scheduler, built together."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import HotState
from runtime_core.scheduling._firing import TickFirer
from runtime_core.scheduling._loop import Scheduler
from runtime_core.scheduling._service import ScheduleService
from runtime_core.scheduling._settings import SchedulingSettings
from runtime_core.scheduling._ticks import ScheduleTicks
from runtime_core.storage import DurableStore


@dataclass(frozen=True)
class Scheduling:
    service: ScheduleService
    scheduler: Scheduler

    def start(self) -> None:
        if self.scheduler.settings.enabled:
            self.scheduler.start()

    def loops_alive(self) -> dict[str, bool]:
        return {"scheduler": self.scheduler.alive} if self.scheduler.settings.enabled else {}

    async def stop(self) -> None:
        await self.scheduler.stop()


def build_scheduling(
    hot_state: HotState, store: DurableStore, control_plane: ControlPlane, settings: SchedulingSettings
) -> Scheduling:
    """The scheduler's owner id names this control plane and process (claims say who fires)."""
    ticks = ScheduleTicks(hot_state, lease_ms=settings.claim_lease_ms)
    firer = TickFirer(control_plane, store, ticks)
    owner = f"{control_plane.settings.control_plane_id}:{os.getpid()}:{secrets.token_hex(4)}"
    scheduler = Scheduler(hot_state, store, ticks, firer, settings, owner=owner)
    engine = control_plane.parts.engine
    service = ScheduleService(
        hot_state,
        store,
        ticks,
        firer,
        check_pipeline=engine.validate,
        check_input=engine.check_input,
        changed=scheduler.schedules_changed,
    )
    return Scheduling(service, scheduler)
