"""ClaimHandle: the engine's `ClaimedStep` for one claimed step (`StepInvocation.claim`).

Owns the claim token an executor fences its own transitions with, the step's events sent
through the engine's observer, and the live output of a streaming step through
`lua/step_output.lua` (the only place that knows its KEYS/ARGV order): text is buffered and
written at most every `OUTPUT_FLUSH_S` or `OUTPUT_FLUSH_CHARS` (one write and one
`step.output` event for many model tokens), and at the latest `OUTPUT_FLUSH_S` after it was
buffered (a model that stalls mid-answer still shows all it wrote), in order (one write at a
time), kept to its last `OUTPUT_MAX_BYTES` in Redis,
and an earlier claim's unfinished output is recorded as discarded (`step.output_discarded`).
A failed write of live output is logged and dropped: the step's result never depends on it.
Must not decide anything about the step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from runtime_core.dag._records import StepClaim
from runtime_core.dag._store import DagStore
from runtime_core.errors import RuntimeCoreError

log = logging.getLogger("runtime_core.dag")

StepEmitter = Callable[..., Awaitable[None]]
"""`emit(event_name, **attributes)`: an engine event of the claimed step."""

OUTPUT_MAX_BYTES = 16_384
OUTPUT_FLUSH_S = 0.05
OUTPUT_FLUSH_CHARS = 512
OUTPUT_EVENT = "step.output"
"""Live partial output: published as a run event, never written to the ledger or the trace."""


class ClaimHandle:
    def __init__(self, store: DagStore, claim: StepClaim, emit: StepEmitter) -> None:
        self.store = store
        self.claim = claim
        self.token = claim.token
        self._emit = emit

    async def emit(self, event: str, **attributes: Any) -> None:
        try:
            await self._emit(event, **attributes)
        except Exception:  # evidence must never fail the step it describes
            log.exception(
                "step.event_failed",
                extra={"execution_id": self.claim.execution_id, "step": self.claim.step_name, "event": event},
            )

    def output_stream(self) -> StepOutputStream:
        return StepOutputStream(self)


class StepOutputStream:
    def __init__(self, handle: ClaimHandle) -> None:
        self._handle = handle
        self._keys = handle.store.keys(handle.claim.execution_id)
        self._script = handle.store.hot_state.scripts["step_output"]
        self._pending: list[str] = []
        self._pending_chars = 0
        self._flushed_at = 0.0
        self._open = False
        self._writing = asyncio.Lock()  # appends keep the text's order
        self._timer: asyncio.TimerHandle | None = None
        self._late: asyncio.Task[None] | None = None  # the flush the timer started

    async def begin(self) -> None:
        reply = await self._call("begin")
        self._open = reply is not None and int(reply[0]) == 1
        self._flushed_at = time.monotonic()
        if self._open and int(reply[2]) > 0:
            await self._handle.emit("step.output_discarded", characters=int(reply[2]))

    async def write(self, text: str) -> None:
        if not self._open or not text:
            return
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars >= OUTPUT_FLUSH_CHARS or time.monotonic() - self._flushed_at >= OUTPUT_FLUSH_S:
            await self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(OUTPUT_FLUSH_S, self._flush_late)

    async def finish(self) -> None:
        if not self._open:
            return
        self._stop_timer()
        await self._flush()
        self._open = False
        await self._call("finish")

    def _flush_late(self) -> None:
        self._timer = None
        self._late = asyncio.ensure_future(self._flush())

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _flush(self) -> None:
        async with self._writing:
            self._stop_timer()
            if not self._pending:
                return
            text, chars = "".join(self._pending), self._pending_chars
            self._pending, self._pending_chars = [], 0
            self._flushed_at = time.monotonic()
            reply = await self._call("append", text, chars)
            if reply is not None and int(reply[0]) == 1:
                await self._handle.emit(OUTPUT_EVENT, text=text, length=int(reply[1]))

    async def _call(self, mode: str, text: str = "", chars: int = 0) -> Any:
        claim = self._handle.claim
        try:
            return await self._script(
                keys=[self._keys.token, self._keys.output],
                args=[claim.step_name, claim.token, mode, text, OUTPUT_MAX_BYTES, chars],
            )
        except RuntimeCoreError as error:  # Redis away: the live view misses this piece only
            log.warning(
                "step.output_write_failed",
                extra={"execution_id": claim.execution_id, "step": claim.step_name, "error": error.message},
            )
            return None


async def read_live_output(store: DagStore, execution_id: str) -> dict[str, tuple[str, int]]:
    """Per streaming step of the execution: its partial output kept so far (the last
    `OUTPUT_MAX_BYTES`) and the characters written in all."""
    fields = await store.hot_state.redis.hgetall(store.keys(execution_id).output)
    return {
        name: (text, int(fields.get(f"{name}:length", "0")))
        for name, text in fields.items()
        if not name.endswith((":token", ":length"))
    }
