"""RunDriver: one local run of a runtime instance, from its start to its recorded end.

Owns starting a run in a free slot with `min(worker_count, max_local_workers_per_execution,
maxDegreeOfParallelism)` engine workers (each holds one of the instance's worker permits
only while it claims and runs steps, so a parked run keeps its slot but holds no worker),
recording its ExecutionId before the DAG exists, creating the execution or continuing the
recovered one it resumes (same ExecutionId, reassigned to this attempt), advancing it
through parks (woken by the doorbell), restoring an execution whose hot state was lost with
the dataset, and recording the run's end, then publishing it as a run event. Every record is
written by compare-and-set, so a record recovery sealed is never started or finished here;
while Redis is unavailable each step backs off and retries. Restores the run's snapshot
before creating and advancing its DAG. Its engine copy tells `assistance` (the instance's
help requester, when assistance is on) when a run's ready steps outnumber its workers. Must not
touch another instance's runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runtime_core.concurrency import parallelism_limit
from runtime_core.dag import (
    PARKED_CONTROL_STATUSES,
    AssistanceHook,
    DagEngine,
    ReassignOutcome,
    WorkerPermits,
)
from runtime_core.errors import FencedError, NotFoundError
from runtime_core.hot_state import ServerClock, retry_while_unavailable
from runtime_core.identity import restored_snapshot
from runtime_core.instances._dependencies import InstanceDependencies
from runtime_core.instances._local_queue import LocalQueue
from runtime_core.instances._local_run import LocalRun, TakenOver, resume_target_missing, run_outcome
from runtime_core.instances._membership import Membership
from runtime_core.instances._models import (
    HOT_STATE_LOST,
    TARGET_INCARNATION_KEY,
    LocalRunStatus,
    RuntimeInstanceSettings,
)
from runtime_core.instances._run_events import announce_end
from runtime_core.instances._run_index import RecordSwap

log = logging.getLogger("runtime_core.instances")

_T = TypeVar("_T")


class RunDriver:
    def __init__(
        self,
        settings: RuntimeInstanceSettings,
        deps: InstanceDependencies,
        queue: LocalQueue,
        membership: Membership,
        permits: WorkerPermits,
        clock: ServerClock,
        *,
        assistance: AssistanceHook | None = None,
    ) -> None:
        self.settings = settings
        self.assistance = assistance
        self.deps = deps
        self.queue = queue
        self.membership = membership
        self.permits = permits
        self.clock = clock  # its local runs' timestamps

    def start(self, run: LocalRun) -> None:
        s = self.settings
        usable = s.workers_per_execution
        # Never more engine workers than its pipeline's maxDegreeOfParallelism.
        run.effective_workers = min(usable, parallelism_limit(run.request.pipeline.config) or usable)
        run.record = run.record.model_copy(update={"status": LocalRunStatus.RUNNING})
        self.queue.running[run.record.local_run_id] = asyncio.create_task(
            self._execute(run), name=f"{s.runtime_instance_id}:{run.record.local_run_id}"
        )

    async def _execute(self, run: LocalRun) -> None:
        outcome: tuple[LocalRunStatus, str | None] | TakenOver
        try:
            outcome = await self._run_execution(run)
        except TakenOver as exc:
            outcome = exc
        except asyncio.CancelledError:
            self.queue.release(run)
            fenced = self.membership.fenced
            if fenced is None or self.membership.stopping.is_set():
                raise
            self.queue.abandon(run, fenced)  # cancelled by the fence: the run is recovery's
            return
        except Exception as exc:  # a broken run must not stop the controller
            log.exception("local_run.failed", extra={"local_run_id": run.record.local_run_id})
            outcome = LocalRunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        self.queue.release(run)
        if isinstance(outcome, TakenOver):
            self.queue.abandon(run, str(outcome))
            return
        await self.finish(run, *outcome, until_stored=True)

    async def _run_execution(self, run: LocalRun) -> tuple[LocalRunStatus, str | None]:
        engine = copy.copy(self.deps.engine)
        engine.instance_id = self.settings.runtime_instance_id
        engine.owner = run.record.local_run_id
        engine.worker_permits = self.permits
        engine.assistance = self.assistance
        execution_id = run.execution_id
        with restored_snapshot(run.snapshot):
            # A heartbeat before anything else: an incarnation fenced while it was paused or
            # cut off learns it here, before it starts a run recovery may have taken over (one
            # already on its way, e.g. the enqueue's, was sent after this process woke too).
            await self.membership.publish_quietly(join_in_flight=True)
            if self.membership.fenced is not None:
                raise TakenOver(self.membership.fenced)
            await self._until_available(
                lambda: self._record_started(run, execution_id), "local_run.record_started"
            )
            try:
                await self._until_available(
                    lambda: self._open_execution(engine, run), "local_run.open_execution"
                )
                run.opened = True  # from now on `cancel_run` cancels the execution itself
                if run.cancel_requested:
                    # Cancelled while its creation was on its way: the step claimed with it goes back.
                    await self._until_available(engine.release_first_claims, "local_run.release_first_claims")
                    await self._until_available(
                        lambda: self.deps.canceller.cancel(
                            execution_id, run.snapshot, reason="cancelled before start"
                        ),
                        "local_run.cancel_before_start",
                    )
            except BaseException:
                engine.drop_first_permit()  # never kept from the instance's other runs
                raise
            final = await self._advance(engine, run, execution_id)
            if not final:
                return await self._after_hot_state_vanished(engine, run, execution_id)
        return run_outcome(final, execution_id)

    async def _advance(self, engine: DagEngine, run: LocalRun, execution_id: str) -> str:
        """Run the execution to a terminal status, through parks; "" when its hot state vanished."""
        # Watched from the start: the control status a parked engine returns was read while
        # watching, so no ring after it can be missed and neither the engine nor the wait needs
        # to read it again first.
        with self.deps.doorbell.watching(execution_id) as rung:
            try:
                final = await engine.run(execution_id, workers=run.effective_workers, watched=True)
                while final in PARKED_CONTROL_STATUSES:
                    await self._wait_until_unparked(engine, run, final, rung)
                    final = await engine.run(execution_id, workers=run.effective_workers, watched=True)
            except NotFoundError:
                return ""
        return final

    async def _after_hot_state_vanished(
        self, engine: DagEngine, run: LocalRun, execution_id: str
    ) -> tuple[LocalRunStatus, str | None]:
        """The execution's DAG is gone: when the Redis dataset was lost, restore the execution
        from its durable copy and continue it, or fail the run with `hot_state_lost`."""
        incarnation = self.membership.incarnation
        await self.membership.rejoined_after_loss()
        if run.epoch == incarnation.epoch:
            return LocalRunStatus.FAILED, "execution finished without a status (its hot state vanished)"
        run.epoch = incarnation.epoch
        restorer = self.deps.restorer
        if restorer is not None and await restorer.restore_execution(
            execution_id, run.snapshot, run.record, incarnation.epoch
        ):
            log.warning(
                "local_run.restored_after_hot_state_loss local_run_id=%s execution_id=%s",
                run.record.local_run_id,
                execution_id,
                extra=self.membership.log_fields(
                    local_run_id=run.record.local_run_id, execution_id=execution_id
                ),
            )
            final = await self._advance(engine, run, execution_id)
            if final:
                return run_outcome(final, execution_id)
        return LocalRunStatus.FAILED, (
            f"{HOT_STATE_LOST}: Redis lost the hot state of execution '{execution_id}' and no durable "
            "copy could restore it"
        )

    async def _record_started(self, run: LocalRun, execution_id: str) -> None:
        """Record the ExecutionId before the DAG exists (compare-and-set: refused once recovery
        sealed the run)."""
        started_at = await self.clock.now_ms()
        run.epoch = self.membership.incarnation.epoch  # the dataset its execution will live in
        await self._swap(
            run, status=LocalRunStatus.RUNNING, execution_id=execution_id, started_at_ms=started_at
        )

    async def _swap(self, run: LocalRun, **changes: object) -> None:
        """Write the run's record by compare-and-set on the revision this incarnation wrote."""
        swap = await self._try_swap(run, changes)
        if not swap.applied and swap.record is None:  # no record: the dataset may have been lost
            await self.membership.rejoined_after_loss()  # (or was, concurrently: the record is back then)
            swap = await self._try_swap(run, changes)
        if not swap.applied:
            holder = swap.record.taken_over_by if swap.record is not None else None
            raise TakenOver(f"run record taken over by {holder}" if holder else "run record changed")

    async def _try_swap(self, run: LocalRun, changes: dict[str, object]) -> RecordSwap:
        async with run.write_lock:
            swap = await self.deps.index.swap(run.stored, **changes)
            if swap.applied and swap.record is not None:
                run.stored = run.record = swap.record
        return swap

    async def _open_execution(self, engine: DagEngine, run: LocalRun) -> str:
        """Create the run's execution, or continue the recovered one it resumes (same ExecutionId).

        The new ExecutionId was chosen once per run, so a creation retried after a lost reply
        finds the DAG it already created instead of making a second one; an ExecutionId that
        recovery gave up (this incarnation was presumed dead) is refused.
        """
        execution_id = run.request.resume_execution_id
        if execution_id is None:
            try:
                return await engine.create_execution(
                    run.request.pipeline,
                    run.request.input,
                    run.snapshot,
                    execution_id=run.fresh_execution_id,
                    attributes=self._attributes(run),
                    # Its workers advance it next: the creation claims their first step.
                    claim_first=not run.cancel_requested,
                )
            except FencedError as exc:
                raise TakenOver(exc.message) from exc
        meta = await engine.store.load_meta(execution_id)
        if meta is None or meta.snapshot is None or meta.snapshot.tenant_id != run.snapshot.tenant_id:
            raise resume_target_missing(execution_id)
        outcome = await engine.reassign_execution(execution_id, run.snapshot, self._attempt_attributes(run))
        if outcome is ReassignOutcome.EXECUTION_MISSING:
            raise resume_target_missing(execution_id)
        return execution_id

    async def _wait_until_unparked(
        self, engine: DagEngine, run: LocalRun, parked_status: str, rung: asyncio.Event
    ) -> None:
        """Parked (its workers idle, holding no permit): wait until another actor unparks it.
        The doorbell rings on its resume / input / cancel; the control state is re-read after
        each ring and, in case a ring was missed, with backoff."""
        doorbell, status, execution_id = self.deps.doorbell, parked_status, run.execution_id
        delay = doorbell.first_wait_s
        try:
            while status in PARKED_CONTROL_STATUSES:
                run.parked = status
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(rung.wait(), delay)
                rung.clear()
                delay = min(doorbell.longest_wait_s, delay * 2)
                status = await self._until_available(
                    lambda: engine.store.control_status(execution_id), "local_run.control_status"
                )
        finally:
            run.parked = None

    def _attributes(self, run: LocalRun) -> dict[str, str]:
        s, snapshot = self.settings, run.snapshot
        return {
            **run.request.attributes,
            "shared_run_id": run.record.shared_run_id or "",
            **self._attempt_attributes(run),
            "tenant.id": snapshot.tenant_id,
            "tenant.groupId": snapshot.tenant_group_id or "",
            "runtime.isolation.mode": s.isolation_mode.value,
        }

    def _attempt_attributes(self, run: LocalRun) -> dict[str, str]:
        """The execution attributes naming this run attempt (replaced when another one resumes it)."""
        s = self.settings
        return {
            "local_run_id": run.record.local_run_id,
            # Claims are refused to any other local run's workers (see DagEngine.owner).
            "owner_local_run_id": run.record.local_run_id,
            TARGET_INCARNATION_KEY: self.membership.incarnation.id,
            "runtime.instance.id": s.runtime_instance_id,
            "assigned.runtime.instance.id": s.runtime_instance_id,
            "max.local.workers.per.execution": str(s.max_local_workers_per_execution),
            "effective.worker.count.per.execution": str(run.effective_workers),
        }

    async def finish(
        self, run: LocalRun, status: LocalRunStatus, reason: str | None, *, until_stored: bool = False
    ) -> None:
        """Record the terminal status (retrying while Redis is down when `until_stored`).

        A record recovery took over meanwhile is left to recovery: the run ends here only.
        """
        try:
            if until_stored:
                await self._until_available(
                    lambda: self._record_finished(run, status, reason), "local_run.record_finished"
                )
            else:
                await self._record_finished(run, status, reason)
        except TakenOver as exc:
            run.mark_taken_over(str(exc))
        finally:
            self.queue.end(run)
        await self.membership.publish_quietly()

    async def _record_finished(self, run: LocalRun, status: LocalRunStatus, reason: str | None) -> None:
        completed_at = await self.clock.now_ms()
        await self._swap(run, status=status, failure_reason=reason, completed_at_ms=completed_at)
        await announce_end(self.deps.index, self.deps.events, run.record)

    async def _until_available(self, operation: Callable[[], Awaitable[_T]], what: str) -> _T:
        return await retry_while_unavailable(
            operation, what, logger=log, runtime_instance_id=self.settings.runtime_instance_id
        )
