"""CoalescedScript: concurrent calls of one hot script share one pipelined round trip.

Many executions advancing at once (chains: one step each at a time) each make one scripted
call per step; the client-side cost of a call (a pooled connection, a write, a read) then
dominates. Calls made while another batch of the same script is in flight wait for it and
then go out together as one non-transactional pipeline of EVALSHAs, so under load a round
trip carries many calls, and an idle process still sends a lone call at once. Each script
call stays atomic by itself; calls of different slots are split per node on a Redis
Cluster. A NOSCRIPT reply (Redis restarted: the script did not run) is retried through the
reloading script. Must not be used where a caller needs calls of one batch applied together
(they are not), nor for scripts whose callers are not independent of each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_core.hot_state._scripts import ReloadingScript


@dataclass
class _Call:
    keys: Sequence[Any]
    args: Sequence[Any]
    reply: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class CoalescedScript:
    def __init__(self, redis: Any, script: ReloadingScript) -> None:
        self._redis = redis
        self._script = script
        self._waiting: list[_Call] = []
        self._sender: asyncio.Task[None] | None = None

    async def __call__(self, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        call = _Call(keys, args)
        self._waiting.append(call)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_while_waiting())
        return await call.reply

    async def _send_while_waiting(self) -> None:
        """Send everything waiting; what arrived meanwhile goes in the next round trip."""
        while self._waiting:
            batch, self._waiting = self._waiting, []
            await self._send(batch)

    async def _send(self, batch: list[_Call]) -> None:
        try:
            if len(batch) == 1:
                replies: list[Any] = [await self._direct(batch[0])]
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

    async def _direct(self, call: _Call) -> Any:
        return await self._script(keys=call.keys, args=call.args)

    async def _pipelined(self, batch: list[_Call]) -> list[Any]:
        pipe = self._redis.pipeline(transaction=False)
        for call in batch:
            self._script.queue(pipe, call.keys, call.args)
        replies = await pipe.execute(raise_on_error=False)
        return [await self._settled_reply(call, reply) for call, reply in zip(batch, replies, strict=True)]

    async def _settled_reply(self, call: _Call, reply: Any) -> Any:
        """The call's reply, or the error its caller gets (one failed call fails only its caller)."""
        try:
            return await self._script.settle(call.keys, call.args, reply)
        except Exception as exc:
            return exc


def _settle(call: _Call, outcome: Any) -> None:
    if call.reply.done():
        return  # the caller was cancelled meanwhile
    if isinstance(outcome, BaseException):
        call.reply.set_exception(outcome)
    else:
        call.reply.set_result(outcome)
