"""One engine worker's loop over one execution, until the execution stops.

Owns a worker's rounds: each holds a worker permit (when the process shares its workers)
while it claims and runs steps through the batch or the gated path, then, when nothing was
claimable, finalizes a converged execution, recovers stale claims and waits idle (woken by
a local change, or polling with backoff for other processes' work); a worker assisting
another instance's execution leaves instead of waiting once none of its fellow workers holds
claims. While Redis is unavailable the worker
backs off and tries again. The execution's snapshot is current for all of it (its steps'
executors see it). Must not run steps nor make transitions itself.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from contextlib import AbstractAsyncContextManager

from runtime_core.dag._batch_path import BatchPath
from runtime_core.dag._gated_path import GatedPath
from runtime_core.dag._step_runner import StepRunner
from runtime_core.dag._worker_context import WorkerContext
from runtime_core.dag._worker_permits import Permit
from runtime_core.dag._worker_state import ExecutionRun, WorkerPace
from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import StoreOutage
from runtime_core.identity import restored_snapshot

log = logging.getLogger("runtime_core.dag")


class WorkerLoop:
    def __init__(self, context: WorkerContext, run: ExecutionRun, worker_id: str) -> None:
        self.context = context
        self.run = run
        self.worker_id = worker_id
        self.steps = StepRunner(context, run, worker_id, secrets.token_hex(8))
        self.batch = BatchPath(self.steps)
        self.gated = GatedPath(self.steps)

    async def work(self) -> None:
        """Advance until the execution stops, backing off while Redis is down."""
        settings = self.context.settings
        pace: WorkerPace | None = WorkerPace(settings.idle_poll_min_ms)
        outage = StoreOutage(
            "engine.worker",
            settings.store_retry,
            logger=log,
            execution_id=self.run.execution_id,
            worker_id=self.worker_id,
        )
        # The execution's snapshot is current for everything the worker does, its steps'
        # executors included: restored once here, not around every step (the worker is a
        # task of its own, and every setter of the snapshot restores the one it replaced).
        with restored_snapshot(self.run.snapshot):
            while pace is not None and self.run.advancing:
                try:
                    pace = await self._work_once(pace)
                except StoreUnavailableError as exc:
                    await outage.wait(exc)
                    continue
                outage.recovered()

    async def _work_once(self, pace: WorkerPace) -> WorkerPace | None:
        """One claim-execute or idle round; how to pace the next one, or None when this worker is done."""
        run, settings = self.run, self.context.settings
        seen = run.idle.generation  # a wake from now on means: claim again, do not wait
        async with self._permit() as permit:
            idle = await self.gated.advance() if run.gates.active else await self.batch.advance(permit)
        if idle is None:
            return WorkerPace(settings.idle_poll_min_ms)
        assisting = self.context.assisting
        if not run.advancing or (assisting and not run.holding):
            # An assistant leaves once nothing is claimable and none of its workers holds
            # claims (their completions may make more steps ready): the owner finishes.
            return None
        # Woken by a local completion that left nothing claimable: that worker finalizes what
        # it converged, so skip the finalize / stale-claim checks (2 round trips per idle worker
        # per step on a chain). A timed-out wait still makes them: other processes' work.
        # Never an assistant's: finalizing and recovery stay with the owner.
        if not pace.woken_locally and not assisting:
            if await self.steps.try_finalize():
                return None
            if await self.context.store.recover_stale(run.execution_id):
                await self.context.emit("step.recovered", run, worker_id=self.worker_id)
                return WorkerPace(pace.idle_ms)
        # An assistant's idle worker polls at its own pace: only completions that release
        # more steps than their worker claims next wake it.
        holding = run.holding and not assisting
        wait_ms = settings.idle_wait_while_executing_ms if holding else pace.idle_ms
        if idle.wake_at_ms is not None:
            wait_ms = max(1, min(wait_ms, idle.wake_at_ms - idle.now_ms))
        # Woken by a local change, or timed out (the timeout covers other processes' work).
        woken = await run.idle.wait(wait_ms / 1000, since=seen)
        return WorkerPace(min(settings.idle_poll_max_ms, pace.idle_ms * 2), woken_locally=woken)

    def _permit(self) -> AbstractAsyncContextManager[Permit | None]:
        """A worker permit for one round of claiming and running steps (none to wait for
        outside a runtime instance); idle waits happen without one."""
        permits = self.context.worker_permits
        if permits is None:
            return contextlib.nullcontext()
        handed, self.run.first_permit = self.run.first_permit, None  # with the creation's claims
        return permits.holding(handed) if handed is not None else permits.held()
