"""A runtime instance's membership: its incarnation's registration, heartbeats and fencing.

Owns registering a new incarnation at every start (taking the id's registration over; a
predecessor's work goes to recovery), heartbeats (every interval, and after each local
change, announcing a freed run slot to `on_capacity`), the verdict a heartbeat carries, and
retiring on a clean stop (unfinished runs are handed to recovery at once). A refused
heartbeat fences the incarnation: it drops its local queue, stops its runs and takes no more
work. A missing registration in a changed dataset (Redis lost its data) makes the incarnation
join the new one: register again, write its live runs' records again and have their shared
runs restored. Must not start, advance or end local runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from runtime_core.errors import StoreUnavailableError
from runtime_core.instances._dependencies import InstanceDependencies
from runtime_core.instances._incarnation import Describe, Incarnation
from runtime_core.instances._local_queue import LocalQueue
from runtime_core.instances._models import RuntimeInstanceSettings
from runtime_core.instances._registry import Heartbeat, HeartbeatOutcome, RetireOutcome

log = logging.getLogger("runtime_core.instances")


class Membership:
    """`fenced` says why this incarnation takes no more work (None while it is live)."""

    def __init__(
        self,
        settings: RuntimeInstanceSettings,
        deps: InstanceDependencies,
        queue: LocalQueue,
        stopping: asyncio.Event,
        describe: Describe,
        accepts_runs: Callable[[], bool],
    ) -> None:
        """`accepts_runs`: whether the capacity `describe` gives would say `can_accept_run`
        (without building it)."""
        self.settings = settings
        self.deps = deps
        self.queue = queue
        self.stopping = stopping
        self.accepts_runs = accepts_runs
        self.incarnation = Incarnation(deps.registry, settings.runtime_instance_id, describe)
        self.fenced: str | None = None
        self._rejoin_lock = asyncio.Lock()

    @property
    def runtime_instance_id(self) -> str:
        return self.settings.runtime_instance_id

    def log_fields(self, **fields: object) -> dict[str, object]:
        return {"runtime_instance_id": self.runtime_instance_id, "incarnation": self.incarnation.id, **fields}

    async def register(self) -> None:
        """Register a new incarnation, taking the id over from any predecessor."""
        predecessor = await self.incarnation.register()
        if predecessor is not None:
            log.info(
                "instance.registration_taken_over runtime_instance_id=%s predecessor=%s",
                self.runtime_instance_id,
                predecessor,
                extra=self.log_fields(predecessor_incarnation=predecessor),
            )

    async def retire(self, *, unfinished: int) -> None:
        """Retire the registration of a live incarnation; unfinished runs go to recovery."""
        if self.fenced is not None or not self.incarnation.id:
            return
        outcome = await self.incarnation.retire(unfinished=unfinished > 0)
        if outcome is RetireOutcome.HANDED_OVER:
            log.info(
                "instance.handed_over runtime_instance_id=%s unfinished_runs=%d",
                self.runtime_instance_id,
                unfinished,
                extra=self.log_fields(unfinished_runs=unfinished),
            )

    async def publish(self, *, join_in_flight: bool = False) -> None:
        """Heartbeat now: registry + capacity descriptors with a fresh version (or, with
        `join_in_flight`, the verdict of a heartbeat already on its way).

        A refused heartbeat fences this incarnation; a missing registration means the Redis
        dataset was lost (then the incarnation joins the new one) or was removed (fenced).
        """
        if self.fenced is not None:
            return
        await self._judge(await self.incarnation.heartbeat(join_in_flight=join_in_flight))

    async def publish_quietly(self, *, join_in_flight: bool = False) -> None:
        """Publish after a local change; with Redis down the next heartbeat publishes it. A
        published free slot is announced (`on_capacity`: this process's pump dispatches now,
        not after its idle interval)."""
        try:
            await self.publish(join_in_flight=join_in_flight)
            if self.deps.on_capacity is not None and self.accepts_runs():
                self.deps.on_capacity()
        except StoreUnavailableError as exc:
            log.warning(
                "instance.publish_skipped runtime_instance_id=%s",
                self.runtime_instance_id,
                extra={"runtime_instance_id": self.runtime_instance_id, "error": exc.message},
            )

    async def _judge(self, beat: Heartbeat) -> None:
        if beat.outcome.fenced:
            self.fence(f"heartbeat refused: {beat.outcome.name.lower()} {beat.detail}".strip())
        elif beat.outcome is HeartbeatOutcome.NOT_REGISTERED and not self.stopping.is_set():
            if await self.rejoined_after_loss():
                return
            # Same dataset: registered again meanwhile (a concurrent rejoin), or removed for good.
            again = await self.incarnation.heartbeat()
            if again.outcome is HeartbeatOutcome.NOT_REGISTERED:
                self.fence("registration removed")
            elif again.outcome.fenced:
                await self._judge(again)

    def fence(self, reason: str) -> None:
        """Take no more work: drop the local queue and stop every run (no index writes: their
        records are recovery's now). Runs learn it where they are cancelled."""
        if self.fenced is not None:
            return
        self.fenced = reason
        log.warning(
            "instance.fenced runtime_instance_id=%s incarnation=%s reason=%s",
            self.runtime_instance_id,
            self.incarnation.id,
            reason,
            extra=self.log_fields(reason=reason),
        )
        self.queue.drop_all(reason)

    async def rejoined_after_loss(self) -> bool:
        """True when the Redis dataset changed since this incarnation joined it (it then joined
        the new one: registered again, live runs' records written again, shared runs restored).

        Returns only once a rejoin already in flight finished: the incarnation joins the new
        dataset before the live runs' records are written again, so a run that found its
        record missing meanwhile must wait for the rest of the rejoin, not only its start."""
        epoch = await self.incarnation.changed_epoch()
        async with self._rejoin_lock:
            if epoch is not None and epoch != self.incarnation.epoch:
                await self._rejoin(epoch)
        return epoch is not None

    async def _rejoin(self, epoch: str) -> None:
        live = self.queue.live()
        log.error(
            "instance.hot_state_lost runtime_instance_id=%s live_runs=%d",
            self.runtime_instance_id,
            len(live),
            extra=self.log_fields(previous_epoch=self.incarnation.epoch, epoch=epoch, live_runs=len(live)),
        )
        await self.incarnation.join(epoch)
        for run in live:
            async with run.write_lock:  # never between a run's own swap and its bookkeeping
                await self.deps.index.put(run.stored)
            if self.deps.restorer is not None and run.request.shared_run_id:
                await self.deps.restorer.restore_shared_run(run.request, run.stored)

    async def heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat_interval_ms / 1000
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=interval)
            if self.stopping.is_set() or self.fenced is not None:
                return
            try:
                await self.publish()
                await self.incarnation.keep_listed()
            except Exception as exc:  # a missed heartbeat makes the instance stale; the next one retries
                log.warning(
                    "instance.heartbeat_failed runtime_instance_id=%s",
                    self.runtime_instance_id,
                    extra={"runtime_instance_id": self.runtime_instance_id, "error": str(exc)},
                )
