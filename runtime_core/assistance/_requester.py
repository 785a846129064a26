"""HelpRequester: the engine's assistance hook on the owning instance's side.

Owns asking for help for an execution whose ready steps came to outnumber its workers here
(or, asked at its creation, whose pipeline is wider than them): posting it on the help boards
of its visibility scopes, keeping the post alive (posted again every half board TTL by a task
of its own, so an owner whose workers are all inside long steps still asks) until the engine
says it is settled (its ready set emptied, or its workers here stopped), then withdrawing it.
The first post is announced as a `run.assistance_wanted` run event (buffered with the
process's other run events): idle instances subscribed to run events look at their boards at
once; a post made at creation is announced again once its backlog appeared (an instance that
found nothing ready then tries again at once). A narrow run never gets here: the engine only
calls when its pipeline is wider than its workers or its last claim call reported the
backlog. Never raises into the engine: a failed post is logged and made again by the
keep-alive. Must not decide which scopes an execution has (`scopes_of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime_core.assistance._board import HelpBoard
from runtime_core.dag import ExecutionMeta
from runtime_core.errors import RuntimeCoreError
from runtime_core.events import RunEvent, RunEventPublisher, RunEventType, run_event_id
from runtime_core.identity import ExecutionContextSnapshot

log = logging.getLogger("runtime_core.assistance")

ScopesOf = Callable[[ExecutionContextSnapshot], Sequence[str]]


@dataclass
class _Posted:
    scopes: Sequence[str]
    keeper: asyncio.Task[None] | None = None
    expected: bool = False  # posted at creation: the backlog is still to come


class HelpRequester:
    """`engine.assistance = requester` on the copies of the engine a runtime instance runs."""

    def __init__(
        self,
        board: HelpBoard,
        scopes_of: ScopesOf,
        *,
        board_ttl_ms: int,
        events: RunEventPublisher | None = None,
        runtime_instance_id: str = "",
    ) -> None:
        self.board = board
        self.scopes_of = scopes_of
        self.board_ttl_ms = board_ttl_ms
        self.events = events
        self.runtime_instance_id = runtime_instance_id
        self._posted: dict[str, _Posted] = {}

    def posted(self, execution_id: str) -> bool:
        """It asks for help for this execution now."""
        return execution_id in self._posted

    async def wants_help(self, meta: ExecutionMeta, backlog: int, workers: int) -> None:
        execution_id, snapshot = meta.execution_id, meta.snapshot
        if snapshot is None:
            return
        known = self._posted.get(execution_id)
        if known is not None:
            if known.expected and backlog > 0:  # the backlog asked for at creation is there
                known.expected = False
                self._announce(execution_id, snapshot)
            return
        posted = self._posted[execution_id] = _Posted(tuple(self.scopes_of(snapshot)), expected=backlog == 0)
        # The keep-alive exists before the first post is awaited: a `settled` arriving meanwhile
        # (another worker of the run saw its backlog drain) cancels it instead of missing it.
        posted.keeper = asyncio.create_task(
            self._keep_posted(execution_id, posted.scopes), name=f"assistance-wanted:{execution_id}"
        )
        await self._post(execution_id, posted.scopes)
        log.info(
            "assistance.wanted execution_id=%s backlog=%d workers=%d",
            execution_id,
            backlog,
            workers,
            extra={
                "execution_id": execution_id,
                "tenant_id": snapshot.tenant_id,
                "runtime_instance_id": self.runtime_instance_id,
                "backlog": backlog,
                "workers": workers,
                "scopes": list(posted.scopes),
            },
        )
        self._announce(execution_id, snapshot)

    async def settled(self, meta: ExecutionMeta) -> None:
        posted = self._posted.pop(meta.execution_id, None)
        if posted is None:
            return
        if posted.keeper is not None:
            posted.keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await posted.keeper
        try:
            await self.board.withdraw(meta.execution_id, posted.scopes)
        except RuntimeCoreError as exc:  # the entry expires on its own
            log.warning(
                "assistance.withdraw_failed", extra={"execution_id": meta.execution_id, "error": exc.message}
            )

    async def _keep_posted(self, execution_id: str, scopes: Sequence[str]) -> None:
        while True:
            await asyncio.sleep(self.board_ttl_ms / 2000)  # a refresh timer
            await self._post(execution_id, scopes)

    async def _post(self, execution_id: str, scopes: Sequence[str]) -> None:
        try:
            await self.board.post(execution_id, scopes, ttl_ms=self.board_ttl_ms)
        except RuntimeCoreError as exc:  # posted again by the keep-alive
            log.warning("assistance.post_failed", extra={"execution_id": execution_id, "error": exc.message})

    def _announce(self, execution_id: str, snapshot: ExecutionContextSnapshot) -> None:
        if self.events is None:
            return
        event_type = RunEventType.ASSISTANCE_WANTED
        self.events.emit(
            RunEvent(
                event_id=run_event_id(event_type, execution_id),
                type=event_type,
                tenant_id=snapshot.tenant_id,
                execution_id=execution_id,
                status="Running",
            )
        )
