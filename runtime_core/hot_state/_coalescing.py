"""Coalescing: concurrent, independent Redis calls share one pipelined round trip.

Many executions advancing at once (chains: one step each at a time), a pump dispatching a
claim batch, or the runs of that batch starting together each make their own calls; the
client-side cost of a round trip (a pooled connection, a write, a read) then dominates.
`Coalescer` sends calls made while a batch is in flight together as the next batch (with the
next calls its answered callers make at once, one loop turn later), in one
non-transactional pipeline, so under load a round trip carries many calls, and an idle
process still sends a lone call at once (the way it would go alone). A call is a group of
commands (a script's EVALSHA, or a few plain commands) with how its reply is read from its
own replies; calls of one batch may be of different scripts. `CoalescedScript` is a script
called that way. Each call stays what it was alone (a script atomic by itself, a command
group not a transaction); calls of different slots are split per node on a Redis Cluster. A
NOSCRIPT reply (Redis restarted: the script did not run) is retried through the reloading
script. A batch carries at most MAX_COALESCED_CALLS calls (the rest go in the next round
trip), so a burst (thousands of parked runs re-reading at once) never becomes one unbounded
pipeline.
Must not be used where a caller needs calls of one batch applied together (they are not),
nor for calls whose callers are not independent of each other; a call's `read` must not
make a coalesced call itself (the sender would wait for itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_core.hot_state._guard import reply_error
from runtime_core.hot_state._scripts import ReloadingScript

MAX_COALESCED_CALLS = 1000
"""Most calls one round trip carries."""
QueueCommands = Callable[[Any], None]
"""Adds a call's commands to a (non-transactional) pipeline."""
ReadReplies = Callable[[list[Any]], Awaitable[Any]]
"""The call's reply from its commands' replies (errors in place, as `raise_on_error=False`)."""


@dataclass
class _Call:
    queue: QueueCommands
    read: ReadReplies
    alone: Callable[[], Awaitable[Any]]
    reply: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Coalescer:
    """`await coalescer.call(queue, read, alone)`: the call's reply. When it is the only one
    waiting it goes by itself: `alone` (a cheaper form, such as a bare EVALSHA), or by
    default its own commands in a pipeline of their own."""

    def __init__(self, redis: Any) -> None:
        self._redis = redis
        self._waiting: list[_Call] = []
        self._sender: asyncio.Task[None] | None = None

    async def call(
        self, queue: QueueCommands, read: ReadReplies, alone: Callable[[], Awaitable[Any]] | None = None
    ) -> Any:
        call = _Call(queue, read, alone or (lambda: self._alone(queue, read)))
        self._waiting.append(call)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_while_waiting())
        return await call.reply

    async def commands(self, queue: QueueCommands) -> list[Any]:
        """A group of plain commands (no scripts): their replies; the first error is raised."""
        return await self.call(queue, _all_replies)

    async def _alone(self, queue: QueueCommands, read: ReadReplies) -> Any:
        pipe = self._redis.pipeline(transaction=False)
        queue(pipe)
        return await read(await pipe.execute(raise_on_error=False))

    async def _send_while_waiting(self) -> None:
        """Send everything waiting; what arrived meanwhile goes in the next round trip, and so
        do the next calls of the callers a round trip answered: they run one loop turn before
        the next round trip leaves (a caller whose reply came back usually makes its next call
        at once, which would otherwise wait a whole round trip behind the batch sent without it)."""
        while self._waiting:
            batch = self._waiting[:MAX_COALESCED_CALLS]
            del self._waiting[:MAX_COALESCED_CALLS]
            await self._send(batch)
            await asyncio.sleep(0)  # the answered callers' next calls join the next batch

    async def _send(self, batch: list[_Call]) -> None:
        try:
            if len(batch) == 1:
                replies: list[Any] = [await _outcome(batch[0].alone())]
            else:
                replies = await self._pipelined(batch)
        except BaseException as exc:  # every caller gets the failure (StoreUnavailableError, ...)
            for call in batch:
                _settle(call, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for call, reply in zip(batch, replies, strict=True):
            _settle(call, reply)

    async def _pipelined(self, batch: list[_Call]) -> list[Any]:
        pipe = self._redis.pipeline(transaction=False)
        bounds = []
        for call in batch:
            start = len(pipe)
            call.queue(pipe)
            bounds.append((start, len(pipe)))
        replies = await pipe.execute(raise_on_error=False)
        return [
            await _outcome(call.read(replies[start:end]))
            for call, (start, end) in zip(batch, bounds, strict=True)
        ]


class CoalescedScript:
    """A script whose concurrent calls (with any other coalesced call) share round trips."""

    def __init__(self, coalescer: Coalescer, script: ReloadingScript) -> None:
        self._coalescer = coalescer
        self._script = script

    async def __call__(self, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        script = self._script
        return await self._coalescer.call(
            lambda pipe: script.queue(pipe, keys, args),
            lambda replies: script.settle(keys, args, replies[0]),
            lambda: script(keys=keys, args=args),
        )


async def _all_replies(replies: list[Any]) -> list[Any]:
    """The replies of a group of plain commands; the first error is raised (see `reply_error`)."""
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply_error("pipelined commands", reply)
    return replies


async def _outcome(reply: Awaitable[Any]) -> Any:
    """The reply, or the error its caller gets (one failed call fails only its caller)."""
    try:
        return await reply
    except Exception as exc:
        return exc


def _settle(call: _Call, outcome: Any) -> None:
    if call.reply.done():
        return  # the caller was cancelled meanwhile
    if isinstance(outcome, BaseException):
        call.reply.set_exception(outcome)
    else:
        call.reply.set_result(outcome)


def read_outcome(future: asyncio.Future[Any]) -> None:
    """A done-callback for a future several callers share: its failure counts as read, so
    one whose callers were all cancelled leaves no 'exception was never retrieved' behind."""
    if not future.cancelled():
        future.exception()
