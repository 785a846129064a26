"""InstanceAssistance: a runtime instance's idle workers assisting other instances' wide runs.

Owns, for one runtime instance: the `HelpRequester` its runs' engine copies tell when their
ready steps outnumber their workers (posted on the help boards of the run's visibility
scopes), and the assisting loop. While the instance is idle (live, not paused or stopping,
nothing queued, a worker free) the loop reads the boards of its own visibility scope (at once
when a `run.assistance_wanted` run event arrives, which also ends the wait of an execution it
could not join before, else every poll interval), passes over the executions it asks help
for itself, checks each candidate against the
execution's snapshot with the visibility rules (never another tenant's dedicated capacity
unless those rules allow it), joins one under an assistance lease with its
effective worker count (min(worker_count, MaxLocalWorkersPerExecution, free workers): local
worker capacity and assistance stay separate, the cap applies to each instance on its own)
and advances it with `DagEngine.assist` until nothing is claimable. The seat is renewed only
after a fresh heartbeat verdict, so an incarnation fenced as Unsafe stops and writes nothing
more (its lease lapses; the steps it held come back through stale-running recovery, its
claims being made with a lease as short as its seat's). Then it leaves, recording the steps it
completed. Must not touch its own local runs nor decide the visibility rules (`_visibility`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from runtime_core.assistance import (
    AssistanceLeases,
    AssistingObserver,
    HelpBoard,
    HelpRequester,
    SeatOutcome,
    assistant_claimer,
    assistant_id,
)
from runtime_core.concurrency import parallelism_limit
from runtime_core.dag import SUPERSEDED_STATUS, DagEngine, EngineEvent, ExecutionMeta, WorkerPermits
from runtime_core.errors import RuntimeCoreError, StoreUnavailableError
from runtime_core.events import RunEvent, RunEventType
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._dependencies import InstanceDependencies
from runtime_core.instances._local_queue import LocalQueue
from runtime_core.instances._membership import Membership
from runtime_core.instances._models import RuntimeInstanceSettings
from runtime_core.instances._visibility import (
    help_scopes_of_instance,
    help_scopes_of_run,
    is_instance_visible,
)

log = logging.getLogger("runtime_core.instances")

_CACHED_METAS = 4  # executions whose definition an assistant keeps between two stays


@dataclass(frozen=True)
class AssistingSeat:
    execution_id: str
    workers: int


class InstanceAssistance:
    def __init__(
        self,
        settings: RuntimeInstanceSettings,
        deps: InstanceDependencies,
        queue: LocalQueue,
        membership: Membership,
        permits: WorkerPermits,
    ) -> None:
        self.settings = settings
        self.config = settings.assistance
        self.deps = deps
        self.queue = queue
        self.membership = membership
        self.permits = permits
        self.lease_ms = self.config.lease_for(settings.heartbeat_interval_ms)
        self.board = HelpBoard(deps.registry.hot_state)
        self.leases = AssistanceLeases(deps.engine.store)
        self.requester = HelpRequester(
            self.board,
            self._run_scopes,
            board_ttl_ms=self.config.board_ttl_ms,
            events=deps.events,
            runtime_instance_id=settings.runtime_instance_id,
        )
        self.scopes = help_scopes_of_instance(
            settings.isolation_mode, settings.tenant_id, settings.tenant_group_id
        )
        self.seat: AssistingSeat | None = None
        self._wake = asyncio.Event()
        self._skipped: dict[str, float] = {}  # execution id -> monotonic time it is left alone until
        self._metas: OrderedDict[str, ExecutionMeta] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.config.enabled and bool(self.scopes)

    def offered_workers(self) -> int:
        """The effective worker count it would bring to another instance's execution now."""
        if not self.enabled:
            return 0
        return max(0, min(self.settings.workers_per_execution, self.permits.free))

    def _run_scopes(self, snapshot: ExecutionContextSnapshot) -> list[str]:
        return help_scopes_of_run(snapshot, self.deps.registry.tenants.resolve(snapshot.tenant_id))

    def _visible(self, snapshot: ExecutionContextSnapshot) -> bool:
        s = self.settings
        tenant = self.deps.registry.tenants.resolve(snapshot.tenant_id)
        return is_instance_visible(s.isolation_mode, s.tenant_id, s.tenant_group_id, snapshot, tenant)

    def _idle(self) -> bool:
        m, q = self.membership, self.queue
        return (
            m.fenced is None
            and not m.stopping.is_set()
            and not q.paused
            and not q.queued
            and self.permits.free > 0
        )

    # The loop

    async def loop(self) -> None:
        """Look for executions to assist while the instance is idle, until it stops or is fenced."""
        unsubscribe = self._listen()
        try:
            while not self.membership.stopping.is_set() and self.membership.fenced is None:
                try:
                    if self._idle() and await self._assist_one():
                        continue
                except StoreUnavailableError as exc:
                    log.warning("assistance.look_failed", extra=self._fields(error=exc.message))
                except Exception:  # the loop outlives any one execution's failure: log it, look again later
                    log.exception("assistance.failed", extra=self._fields())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.config.poll_interval_ms / 1000)
                self._wake.clear()
        finally:
            unsubscribe()

    def _listen(self) -> Callable[[], None]:
        """Wake on `run.assistance_wanted` (and whenever events may have been missed), over the
        process's run-event subscription; without one the poll interval alone paces the loop."""
        subscriber = self.deps.doorbell.subscriber
        if subscriber is None:
            return lambda: None
        return subscriber.listen(
            self._on_run_event, gap=self._wake.set, types=(RunEventType.ASSISTANCE_WANTED,)
        )

    def _on_run_event(self, event: RunEvent) -> None:
        if event.type is RunEventType.ASSISTANCE_WANTED:
            if event.execution_id is not None:  # announced again: its backlog is there now
                self._skipped.pop(event.execution_id, None)
            self._wake.set()

    async def _assist_one(self) -> bool:
        """Join and assist one wanted execution; False when none could be joined."""
        now = time.monotonic()
        self._skipped = {eid: until for eid, until in self._skipped.items() if until > now}
        for execution_id in await self.board.wanted(self.scopes, limit=self.config.candidates):
            # Its own runs' requests (posted before they are announced) are not read at all:
            # joining them is refused (OWN_EXECUTION), after reading their whole metadata.
            if execution_id in self._skipped or self.requester.posted(execution_id):
                continue
            if await self._try(execution_id):
                return True
            self._skipped[execution_id] = now + self.config.skip_ms / 1000
        return False

    async def _try(self, execution_id: str) -> bool:
        meta = await self._visible_meta(execution_id)
        workers = self.offered_workers()
        if meta is None or workers == 0:
            return False
        assistant = assistant_id(self.settings.runtime_instance_id, self.membership.incarnation.id)
        seat = await self.leases.join(
            execution_id,
            assistant,
            runtime_instance_id=self.settings.runtime_instance_id,
            incarnation=self.membership.incarnation.id,
            workers=workers,
            lease_ms=self.lease_ms,
        )
        if seat.outcome is not SeatOutcome.SEATED:
            if seat.outcome in (SeatOutcome.EXECUTION_MISSING, SeatOutcome.NOT_RUNNING):
                self._metas.pop(execution_id, None)
            return False
        await self._assist(meta, assistant, workers)
        return True

    async def _visible_meta(self, execution_id: str) -> ExecutionMeta | None:
        """The execution's definition, when its snapshot lets this instance assist it and its
        pipeline does not cap its own parallelism; its snapshot is checked before anything else
        of it is read."""
        meta = self._metas.get(execution_id)
        if meta is None:
            raw = (await self.deps.engine.store.load_attributes(execution_id, "snapshot"))["snapshot"]
            snapshot = ExecutionContextSnapshot.from_json(raw) if raw else None
            if snapshot is None or not self._visible(snapshot):
                return None
            meta = await self.deps.engine.store.load_meta(execution_id)
            if meta is None:
                return None
            self._metas[execution_id] = meta
            while len(self._metas) > _CACHED_METAS:
                self._metas.popitem(last=False)
        self._metas.move_to_end(execution_id)
        return None if parallelism_limit(meta.pipeline.config) else meta

    # One stay

    async def _assist(self, meta: ExecutionMeta, assistant: str, workers: int) -> None:
        execution_id = meta.execution_id
        engine = self._engine()
        observer = engine.observer
        assert isinstance(observer, AssistingObserver)
        self.seat = AssistingSeat(execution_id, workers)
        reason = "nothing left to claim"
        try:
            await self.membership.publish_quietly()
            await self._emit(
                engine, meta, "execution.assistance_joined", workers=workers, lease_ms=self.lease_ms
            )
            log.info(
                "assistance.joined execution_id=%s workers=%d",
                execution_id,
                workers,
                extra=self._fields(execution_id=execution_id, tenant_id=_tenant(meta), workers=workers),
            )
            reason = await self._advance(engine, meta, assistant, workers)
        finally:
            await self._leave(engine, meta, assistant, reason, observer.take_completed(execution_id))

    async def _advance(self, engine: DagEngine, meta: ExecutionMeta, assistant: str, workers: int) -> str:
        """Assist until nothing is claimable, or until the seat is lost; why it stopped."""
        assisting = asyncio.ensure_future(
            engine.assist(meta.execution_id, workers=workers, claimer=assistant_claimer(assistant), meta=meta)
        )
        keeper = asyncio.ensure_future(self._keep_seat(meta.execution_id, assistant))
        try:
            await asyncio.wait({assisting, keeper}, return_when=asyncio.FIRST_COMPLETED)
            if not assisting.done():
                return await keeper  # the seat was lost: the workers stop where they are
            status = await assisting
        finally:
            for task in (assisting, keeper):
                task.cancel()
            await asyncio.gather(assisting, keeper, return_exceptions=True)
        if status == SUPERSEDED_STATUS:
            return "assistance lease lapsed"
        return f"execution {status}" if status else "nothing left to claim"

    async def _keep_seat(self, execution_id: str, assistant: str) -> str:
        """Renew the seat every third of its lease, each time after a fresh heartbeat verdict;
        returns why it could not (fenced, or the seat is gone)."""
        while True:
            await asyncio.sleep(self.lease_ms / 3000)  # a renewal timer
            try:
                await self.membership.publish(join_in_flight=True)
                if self.membership.fenced is not None:
                    return f"fenced: {self.membership.fenced}"
                seat = await self.leases.renew(execution_id, assistant, lease_ms=self.lease_ms)
            except StoreUnavailableError as exc:  # the lease may lapse meanwhile: claims stop then
                log.warning(
                    "assistance.renew_failed",
                    extra=self._fields(execution_id=execution_id, error=exc.message),
                )
                continue
            if seat.outcome is not SeatOutcome.SEATED:
                return (
                    "assistance lease lapsed" if seat.outcome is SeatOutcome.NOT_SEATED else seat.outcome.name
                )

    async def _leave(
        self, engine: DagEngine, meta: ExecutionMeta, assistant: str, reason: str, completed: int
    ) -> None:
        """Give the seat back and record the stay (never once fenced: it writes nothing more)."""
        self.seat = None
        execution_id = meta.execution_id
        if self.membership.fenced is not None:
            reason = f"fenced: {self.membership.fenced}"
        else:
            try:
                await self.leases.leave(execution_id, assistant, steps_completed=completed, reason=reason)
            except RuntimeCoreError as exc:  # its lease lapses on its own
                log.warning(
                    "assistance.leave_failed",
                    extra=self._fields(execution_id=execution_id, error=exc.message),
                )
            await self._emit(
                engine, meta, "execution.assistance_left", steps_completed=completed, reason=reason
            )
            await self.membership.publish_quietly()
        log.info(
            "assistance.left execution_id=%s steps_completed=%d reason=%s",
            execution_id,
            completed,
            reason,
            extra=self._fields(
                execution_id=execution_id, tenant_id=_tenant(meta), steps_completed=completed, reason=reason
            ),
        )

    def _engine(self) -> DagEngine:
        """A copy of the instance's engine for one stay: its claims last as long as its seat."""
        prototype = self.deps.engine
        settings = dataclasses.replace(
            prototype.settings, lease_ms=min(prototype.settings.lease_ms, self.lease_ms)
        )
        engine = prototype.with_settings(settings)
        engine.instance_id = self.settings.runtime_instance_id
        engine.owner = ""
        engine.worker_permits = self.permits
        engine.assistance = None
        engine.observer = AssistingObserver(prototype.observer, self.settings.runtime_instance_id)
        return engine

    async def _emit(self, engine: DagEngine, meta: ExecutionMeta, name: str, **attributes: object) -> None:
        await engine.observer.on_event(
            EngineEvent(
                name,
                meta.execution_id,
                meta.snapshot,
                attributes={"runtime.instance.id": self.settings.runtime_instance_id, **attributes},
            )
        )

    def _fields(self, **fields: object) -> dict[str, object]:
        return self.membership.log_fields(**fields)


def _tenant(meta: ExecutionMeta) -> str:
    return meta.snapshot.tenant_id if meta.snapshot is not None else ""
