"""DatasetWatch: a control plane notices that Redis lost the dataset it works in.

Owns remembering the dataset epoch the control plane joined, checking it at an interval, and
on a change logging `hot_state.lost` (an operator must know: active runs' hot state is gone)
and running the control plane's re-publish callbacks (its discovery record lived in the lost
dataset). Runs themselves are restored or failed by the instances that hold them. While
Redis is unavailable a check is skipped. Must not touch runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import HotState, dataset_epoch

log = logging.getLogger("runtime_core.continuity")


class DatasetWatch:
    def __init__(self, hot_state: HotState, on_lost: list[Callable[[], Awaitable[object]]]) -> None:
        self.hot_state = hot_state
        self.on_lost = on_lost
        self.epoch = ""
        self.losses = 0

    async def join(self) -> str:
        self.epoch = await dataset_epoch(self.hot_state)
        return self.epoch

    async def check_once(self) -> bool:
        """True when the dataset changed since the last check (the callbacks then ran)."""
        epoch = await dataset_epoch(self.hot_state)
        if epoch == self.epoch:
            return False
        log.error(
            "hot_state.lost previous_epoch=%s epoch=%s: Redis lost its dataset; active runs are "
            "restored from their durable copies or fail with hot_state_lost (configure appendonly yes)",
            self.epoch,
            epoch,
            extra={"previous_epoch": self.epoch, "epoch": epoch},
        )
        self.epoch = epoch
        self.losses += 1
        for callback in self.on_lost:
            await callback()
        return True

    async def run_forever(self, stop: asyncio.Event, *, interval_ms: int) -> None:
        while not stop.is_set():
            try:
                await self.check_once()
            except StoreUnavailableError:
                pass  # Redis is down: the next check after it is back tells
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_ms / 1000)
