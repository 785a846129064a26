"""RunEventPublisher: run events onto Redis pub/sub (live) and the durable event stream.

Owns how an event leaves the process. `publish` (the end of a run, a wait for input) writes
now, in one `publish_run_event` call (like every call here, sharing a round trip with the
process's other Redis calls in flight): the events buffered so far and this one in one PUBLISH
(so subscribers see them in order), after an XADD to the durable stream (only once a webhook
service created that stream); events published while such a call is in flight go together
in the next one; it raises `StoreUnavailableError` so a caller that must not lose the event
can retry. `emit` (step progress and the other status changes: queued, dispatched, started,
paused, resumed, ...) only buffers: a background task flushes the buffer within 10 ms, in
one `publish_run_event` call (no durable entry) per batch, so the caller waits for no round
trip and a busy process sends many events per PUBLISH; buffered events are lost if the
process dies, which subscribers tolerate (they re-read the run). Must not decide what an event means.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from runtime_core.errors import StoreUnavailableError
from runtime_core.events._keys import EVENT_FIELD, RunEventKeys
from runtime_core.events._models import RunEvent
from runtime_core.hot_state import HotState, read_outcome

log = logging.getLogger("runtime_core.events")

DEFAULT_STREAM_MAX_LEN = 100_000
_MAX_BUFFERED = 10_000  # progress events kept while Redis is unreachable; older ones are dropped
_FLUSH_BATCH = 500
GATHER_S = 0.01
"""How long emitted events wait for company before the flusher sends them."""


class RunEventPublisher:
    def __init__(self, hot_state: HotState, *, stream_max_len: int = DEFAULT_STREAM_MAX_LEN) -> None:
        self.hot_state = hot_state
        self.keys = RunEventKeys(hot_state)
        self.stream_max_len = stream_max_len
        self._buffer: list[RunEvent] = []
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._urgent: list[tuple[RunEvent, asyncio.Future[None]]] = []  # `publish` calls waiting
        self._urgent_sender: asyncio.Task[None] | None = None

    async def publish(self, event: RunEvent) -> None:
        """Publish now, after the buffered progress, and append a durable event to the stream
        if it exists (the webhook service creates it): one `publish_run_event` call, shared by
        the events published while another call is in flight (group commit)."""
        sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        sent.add_done_callback(read_outcome)
        self._urgent.append((event, sent))
        if self._urgent_sender is None or self._urgent_sender.done():
            self._urgent_sender = asyncio.create_task(self._send_urgent(), name="run-events-publish")
        await asyncio.shield(sent)

    async def _send_urgent(self) -> None:
        while self._urgent:
            async with self._lock:
                urgent, self._urgent = self._urgent, []
                try:
                    await self._send_with_buffered([event for event, _ in urgent])
                except BaseException as exc:  # each publisher may retry (StoreUnavailableError)
                    for _, sent in urgent:
                        sent.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
            for _, sent in urgent:
                sent.set_result(None)

    async def _send_with_buffered(self, events: list[RunEvent]) -> None:
        batch = [*self._buffer, *events]
        await self._publish(batch, [event.model_dump_json() for event in events if event.durable])
        del self._buffer[: len(batch) - len(events)]

    async def _publish(self, batch: list[RunEvent], durable: list[str]) -> None:
        await self.hot_state.coalesced("publish_run_event")(
            [self.keys.stream],
            [self.keys.channel, _batch_body(batch), EVENT_FIELD, self.stream_max_len, *durable],
        )

    def emit(self, event: RunEvent) -> None:
        """Buffer a progress event; the flusher publishes it shortly, in a batch."""
        if len(self._buffer) >= _MAX_BUFFERED:
            del self._buffer[0]
        self._buffer.append(event)
        self._wake.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_forever(), name="run-events-flush")

    async def flush(self) -> None:
        async with self._lock:
            while self._buffer:
                batch = self._buffer[:_FLUSH_BATCH]
                await self._publish(batch, [])
                del self._buffer[: len(batch)]

    async def aclose(self) -> None:
        """Stop the flusher; publish what is still buffered when Redis answers."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        with contextlib.suppress(StoreUnavailableError):
            await self.flush()

    async def _flush_forever(self) -> None:
        delay = 0.05
        while True:
            await self._wake.wait()
            # Gather what the process emits meanwhile (and let a `publish` carry it): a busy
            # process then sends one PUBLISH for many events instead of one each.
            await asyncio.sleep(GATHER_S)
            self._wake.clear()
            try:
                await self.flush()
                delay = 0.05
            except StoreUnavailableError as exc:
                log.warning("run_events.flush_failed", extra={"error": exc.message})
                await asyncio.sleep(delay)  # back off while Redis is down, then retry the buffer
                delay = min(2.0, delay * 2)
                self._wake.set()


def _batch_body(batch: list[RunEvent]) -> str:
    """One publication: the JSON list of its events."""
    return json.dumps([event.model_dump(mode="json") for event in batch], separators=(",", ":"))
