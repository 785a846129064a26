"""A runtime instance: local queue + background controller + workers running `DagEngine.run`.

Owns the local RunId lifecycle (Queued, Running, Completed, Failed, Cancelled), run slots
(a queued run starts as soon as one of `max_concurrent_runs` is free), the instance's worker
permits (`worker_count`, shared at step granularity: a run's
`min(worker_count, max_local_workers_per_execution, maxDegreeOfParallelism)` engine workers
hold a permit only while they claim and run steps, so a run's steps wait for a worker
instead of failing and a parked run, paused or waiting for input, keeps its run slot but
holds no worker), queue pause / resume, hot enqueue, queued-run cancellation (no ExecutionId
is ever created) and running-run cancellation bridged to execution control by ExecutionId,
the end of each local run published as a run event once its closed record is stored,
resuming a recovered execution by its existing ExecutionId instead of creating one (the
execution then carries this attempt's LocalRunId and instance attributes, so ledger entries
after the resume name it), the run-execution index records of its runs, and the heartbeat
publication of its registry and capacity descriptors. A shared-run dispatch attempt is
accepted at most once: the same attempt again (a provider retry) gets the run it created
while this instance still knows it, and an attempt the dispatcher already abandoned after a
lost reply is refused (see the run index). Restores each run's
snapshot before creating and advancing its DAG; refuses a run without a snapshot. While
Redis is unavailable a started run backs off and retries (its ExecutionId is chosen once,
so a retried creation never makes a second DAG) and heartbeats are skipped, never fatal.
Keeps only the most recent finished runs in memory (older ones are read from the index).

Incarnations and fencing: every `start()` is a new incarnation that takes the instance id's
registration over (a predecessor's work goes to recovery). The incarnation learns it was
fenced (superseded, or marked Unsafe while it was paused or cut off) from a refused
heartbeat, which it also sends before starting any local run; it then takes no more work,
stops its runs and writes nothing more. Its local run records are written by
compare-and-set, so a record recovery sealed is never started or finished by it, and its
executions' claims are refused once recovery handed them to another local run. A clean
`stop()` retires the registration, handing unfinished runs to recovery at once. When the
Redis dataset was lost (the dataset epoch changed), the incarnation registers again, writes
its live runs' records again (and has their shared runs restored), and restores each lost
execution from its durable copy or fails it with `hot_state_lost`.
Must not read tenants from anything but the snapshot, nor touch another instance's runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runtime_core.concurrency import parallelism_limit
from runtime_core.dag import PARKED_CONTROL_STATUSES, DagEngine, ReassignOutcome, WorkerPermits
from runtime_core.errors import (
    ConflictError,
    FencedError,
    MissingSnapshotError,
    NotFoundError,
    StoreUnavailableError,
)
from runtime_core.hot_state import ServerClock, read_outcome, retry_while_unavailable
from runtime_core.identity import new_local_run_id, restored_snapshot
from runtime_core.instances._dependencies import InstanceDependencies
from runtime_core.instances._descriptors import InstanceLoad, instance_capacity, instance_descriptor
from runtime_core.instances._incarnation import Incarnation
from runtime_core.instances._local_run import LocalRun, TakenOver, resume_target_missing, run_outcome
from runtime_core.instances._models import (
    HOT_STATE_LOST,
    TARGET_INCARNATION_KEY,
    CapacityDescriptor,
    InstanceDescriptor,
    LocalRunRequest,
    LocalRunStatus,
    LocalRunView,
    QueueStateView,
    RuntimeInstanceSettings,
)
from runtime_core.instances._registry import Heartbeat, HeartbeatOutcome, RetireOutcome
from runtime_core.instances._run_events import local_run_end
from runtime_core.instances._run_index import RecordSwap, RunIndexRecord

log = logging.getLogger("runtime_core.instances")

_T = TypeVar("_T")

# Finished local runs kept in memory for `run_view` / `wait_for_run`; older ones are
# dropped (their index records stay in Redis), so memory stays bounded under load.
FINISHED_RUNS_KEPT = 1_000


class RuntimeInstance:
    """`await instance.start()`, then `enqueue` runs; `stop()` unregisters it."""

    def __init__(self, settings: RuntimeInstanceSettings, deps: InstanceDependencies) -> None:
        self.settings = settings
        self.deps = deps
        self._runs: dict[str, LocalRun] = {}
        self._attempts: dict[str, str] = {}  # dispatch attempt id -> LocalRunId, while in `_runs`
        self._finished: deque[str] = deque()
        self._queue: deque[LocalRun] = deque()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._permits = WorkerPermits(settings.worker_count)
        self._clock = ServerClock(deps.registry.hot_state)  # its local runs' timestamps
        self._paused = False
        self._pause_reason: str | None = None
        self._pause_requested_by: str | None = None
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._accepting: dict[object, asyncio.Future[LocalRun]] = {}  # by dispatch attempt id
        self._loops: list[asyncio.Task[None]] = []
        self._incarnation = Incarnation(deps.registry, settings.runtime_instance_id, self._describe)
        self._fenced: str | None = None  # why this incarnation takes no more work
        self._rejoin_lock = asyncio.Lock()

    @property
    def runtime_instance_id(self) -> str:
        return self.settings.runtime_instance_id

    @property
    def incarnation(self) -> str:
        """This start's incarnation token ("" before `start()`)."""
        return self._incarnation.id

    @property
    def fenced(self) -> str | None:
        """Why this incarnation was fenced (it takes no more work), None while it is live."""
        return self._fenced

    @property
    def loops_alive(self) -> bool:
        """Controller and heartbeat started and neither ended (readiness reads this)."""
        return bool(self._loops) and not any(loop.done() for loop in self._loops)

    # Lifecycle

    async def start(self) -> RuntimeInstance:
        """Register a new incarnation (taking the id over from any predecessor) and start."""
        predecessor = await self._incarnation.register()
        if predecessor is not None:
            log.info(
                "instance.registration_taken_over runtime_instance_id=%s predecessor=%s",
                self.runtime_instance_id,
                predecessor,
                extra=self._log_fields(predecessor_incarnation=predecessor),
            )
        self.deps.doorbell.listen()  # listening before any of its runs parks
        self._loops = [
            asyncio.create_task(self._control_loop(), name=f"{self.runtime_instance_id}:controller"),
            asyncio.create_task(self._heartbeat_loop(), name=f"{self.runtime_instance_id}:heartbeat"),
        ]
        return self

    async def stop(self, *, unregister: bool = True) -> None:
        """Stop the controller, heartbeat and workers (their DAGs stay in Redis for recovery).

        `unregister`: retire the registration; unfinished local runs are handed to recovery.
        """
        unfinished = sum(not run.done.is_set() for run in self._runs.values())
        self._stopping.set()
        tasks = [*self._loops, *self._tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loops = []
        if unregister and self._fenced is None and self.incarnation:
            outcome = await self._incarnation.retire(unfinished=unfinished > 0)
            if outcome is RetireOutcome.HANDED_OVER:
                log.info(
                    "instance.handed_over runtime_instance_id=%s unfinished_runs=%d",
                    self.runtime_instance_id,
                    unfinished,
                    extra=self._log_fields(unfinished_runs=unfinished),
                )

    def _log_fields(self, **fields: object) -> dict[str, object]:
        return {"runtime_instance_id": self.runtime_instance_id, "incarnation": self.incarnation, **fields}

    # Descriptors

    def _describe(self) -> tuple[InstanceDescriptor, CapacityDescriptor]:
        return self.descriptor(), self.capacity()

    def _load(self) -> InstanceLoad:
        return InstanceLoad(
            incarnation=self.incarnation,
            queued=len(self._queue),
            running=len(self._tasks),
            active_workers=self._permits.in_use,
            paused=self._paused,
            stopping=self._stopping.is_set(),
            fenced=self._fenced is not None,
        )

    def descriptor(self) -> InstanceDescriptor:
        return instance_descriptor(self.settings, self._load())

    def capacity(self) -> CapacityDescriptor:
        return instance_capacity(self.settings, self._load())

    def queue_state(self) -> QueueStateView:
        return QueueStateView(
            runtime_instance_id=self.runtime_instance_id,
            paused=self._paused,
            reason=self._pause_reason,
            requested_by=self._pause_requested_by,
            queued=len(self._queue),
            running=len(self._tasks),
        )

    async def publish(self, *, join_in_flight: bool = False) -> None:
        """Heartbeat now: registry + capacity descriptors with a fresh version (or, with
        `join_in_flight`, the verdict of a heartbeat already on its way).

        A refused heartbeat fences this incarnation; a missing registration means the Redis
        dataset was lost (then the incarnation joins the new one) or was removed (fenced).
        """
        if self._fenced is not None:
            return
        await self._judge(await self._incarnation.heartbeat(join_in_flight=join_in_flight))

    async def _judge(self, beat: Heartbeat) -> None:
        if beat.outcome.fenced:
            self._fence(f"heartbeat refused: {beat.outcome.name.lower()} {beat.detail}".strip())
        elif beat.outcome is HeartbeatOutcome.NOT_REGISTERED and not self._stopping.is_set():
            if await self._rejoined_after_loss():
                return
            # Same dataset: registered again meanwhile (a concurrent rejoin), or removed for good.
            again = await self._incarnation.heartbeat()
            if again.outcome is HeartbeatOutcome.NOT_REGISTERED:
                self._fence("registration removed")
            elif again.outcome.fenced:
                await self._judge(again)

    def _fence(self, reason: str) -> None:
        """Take no more work: drop the local queue and stop every run (no index writes: their
        records are recovery's now). Runs learn it in `_execute`."""
        if self._fenced is not None:
            return
        self._fenced = reason
        log.warning(
            "instance.fenced runtime_instance_id=%s incarnation=%s reason=%s",
            self.runtime_instance_id,
            self.incarnation,
            reason,
            extra=self._log_fields(reason=reason),
        )
        while self._queue:
            self._abandon(self._queue.popleft(), reason)
        current = asyncio.current_task()
        for task in self._tasks.values():
            if task is not current:
                task.cancel()
        self._wake.set()

    async def _rejoined_after_loss(self) -> bool:
        """True when the Redis dataset changed since this incarnation joined it (it then joined
        the new one: registered again, live runs' records written again, shared runs restored)."""
        epoch = await self._incarnation.changed_epoch()
        if epoch is None:
            return False
        async with self._rejoin_lock:
            if epoch != self._incarnation.epoch:
                await self._rejoin(epoch)
        return True

    async def _rejoin(self, epoch: str) -> None:
        live = [run for run in self._runs.values() if not run.done.is_set()]
        log.error(
            "instance.hot_state_lost runtime_instance_id=%s live_runs=%d",
            self.runtime_instance_id,
            len(live),
            extra=self._log_fields(previous_epoch=self._incarnation.epoch, epoch=epoch, live_runs=len(live)),
        )
        await self._incarnation.join(epoch)
        for run in live:
            async with run.write_lock:  # never between a run's own swap and its bookkeeping
                await self.deps.index.put(run.stored)
            if self.deps.restorer is not None and run.request.shared_run_id:
                await self.deps.restorer.restore_shared_run(run.request, run.stored)

    async def _publish_quietly(self, *, join_in_flight: bool = False) -> None:
        """Publish after a local change; with Redis down the next heartbeat publishes it. A
        published free slot is announced (`on_capacity`: this process's pump dispatches now,
        not after its idle interval)."""
        try:
            await self.publish(join_in_flight=join_in_flight)
            if self.deps.on_capacity is not None and self.capacity().can_accept_run:
                self.deps.on_capacity()
        except StoreUnavailableError as exc:
            log.warning(
                "instance.publish_skipped runtime_instance_id=%s",
                self.runtime_instance_id,
                extra={"runtime_instance_id": self.runtime_instance_id, "error": exc.message},
            )

    async def _until_available(self, operation: Callable[[], Awaitable[_T]], what: str) -> _T:
        return await retry_while_unavailable(
            operation, what, logger=log, runtime_instance_id=self.runtime_instance_id
        )

    # Local queue

    async def enqueue(self, request: LocalRunRequest) -> LocalRunView:
        """Hot enqueue (also while running or paused); the run gets a LocalRunId, no ExecutionId yet."""
        if request.snapshot is None:
            raise MissingSnapshotError(
                f"Runtime instance '{self.runtime_instance_id}' refuses a run without an "
                "ExecutionContextSnapshot.",
                hint="Dispatch the run with the snapshot captured at submission.",
            )
        known = self._known_attempt(request)
        if known is not None:
            return known.view()
        attempt_id = request.dispatch_attempt_id
        accepting = self._accepting.get(attempt_id) if attempt_id else None
        if accepting is not None:  # the same attempt again (a provider retry) while it is stored
            return (await asyncio.shield(accepting)).view()
        self._check_accepting(request)
        # Accepts run concurrently (a pump dispatches a claim batch at once): their index
        # writes and the capacity publication after them share round trips.
        accepted: asyncio.Future[LocalRun] = asyncio.get_running_loop().create_future()
        accepted.add_done_callback(read_outcome)
        key = attempt_id or object()
        self._accepting[key] = accepted
        try:
            run = await self._accept(request)
        except BaseException as exc:
            accepted.set_exception(exc)
            raise
        finally:
            del self._accepting[key]
        accepted.set_result(run)
        self._wake.set()
        await self._publish_quietly()
        return run.view()

    async def _accept(self, request: LocalRunRequest) -> LocalRun:
        """Store the accepted run's record and queue it locally."""
        assert request.snapshot is not None
        record = RunIndexRecord(
            local_run_id=new_local_run_id(),
            shared_run_id=request.shared_run_id,
            runtime_instance_id=self.runtime_instance_id,
            incarnation=self.incarnation,
            status=LocalRunStatus.QUEUED,
            execution_id=request.resume_execution_id,
            created_at_ms=await self._clock.now_ms(),
            snapshot=request.snapshot,
            metadata=dict(request.attributes),
        )
        await self._store_accepted(record, request.dispatch_attempt_id)
        run = LocalRun(request, record, record, self._incarnation.epoch)
        self._runs[record.local_run_id] = run
        if request.dispatch_attempt_id:
            self._attempts[request.dispatch_attempt_id] = record.local_run_id
        self._queue.append(run)
        if request.shared_run_id:
            self._incarnation.counted(request.shared_run_id)  # frees its dispatcher's reservation
        return run

    def _known_attempt(self, request: LocalRunRequest) -> LocalRun | None:
        """The run this dispatch attempt already created (attempt ids are random, never reused)."""
        attempt_id = request.dispatch_attempt_id
        local_run_id = self._attempts.get(attempt_id) if attempt_id else None
        return self._runs.get(local_run_id) if local_run_id else None

    async def _store_accepted(self, record: RunIndexRecord, attempt_id: str | None) -> None:
        """Index the new run; refuse it if its dispatch attempt was settled before (abandoned)."""
        if attempt_id is None:
            await self.deps.index.put(record)
            return
        holder = await self.deps.index.put_accepted(record, attempt_id)
        if holder == record.local_run_id:
            return
        # The dispatcher gave up on this attempt (its reply was lost) and requeued the run.
        reason = f"dispatch attempt '{attempt_id}' was already settled ({holder})"
        await self.deps.index.update(
            record,
            status=LocalRunStatus.CANCELLED,
            failure_reason=reason,
            completed_at_ms=record.created_at_ms,
        )
        raise ConflictError(
            f"Runtime instance '{self.runtime_instance_id}' did not queue shared run "
            f"'{record.shared_run_id}': {reason}.",
            hint="The shared queue dispatches the run again with a new attempt; nothing to do.",
        )

    def _check_accepting(self, request: LocalRunRequest) -> None:
        if self._fenced is not None:
            raise FencedError(
                f"Runtime instance '{self.runtime_instance_id}' incarnation '{self.incarnation}' is "
                f"fenced ({self._fenced}) and takes no more work.",
                hint="Dispatch to another runtime instance.",
            )
        target = request.target_incarnation
        if target is not None and target != self.incarnation:
            raise FencedError(
                f"Dispatch reserved capacity of incarnation '{target}' of runtime instance "
                f"'{self.runtime_instance_id}', not of this incarnation '{self.incarnation}'.",
                hint="The shared queue dispatches the run again after reading the registry anew.",
            )
        if self._stopping.is_set() or not self._loops:
            raise ConflictError(
                f"Runtime instance '{self.runtime_instance_id}' is not running.",
                hint="Dispatch to another runtime instance.",
            )
        if len(self._queue) + len(self._accepting) >= self.settings.local_queue_capacity:
            raise ConflictError(
                f"Local queue of '{self.runtime_instance_id}' is full "
                f"({self.settings.local_queue_capacity} queued runs).",
                hint="Wait for queued runs to start, or dispatch elsewhere.",
            )

    async def pause_queue(self, *, reason: str = "", requested_by: str = "") -> QueueStateView:
        """Queued runs stay Queued (no ExecutionId); running executions continue."""
        self._paused, self._pause_reason, self._pause_requested_by = (
            True,
            reason or None,
            requested_by or None,
        )
        await self.publish()
        return self.queue_state()

    async def resume_queue(self, *, requested_by: str = "") -> QueueStateView:
        self._paused, self._pause_reason, self._pause_requested_by = False, None, requested_by or None
        await self.publish()
        self._wake.set()
        return self.queue_state()

    def run_view(self, local_run_id: str) -> LocalRunView:
        return self._get(local_run_id).view()

    def local_runs(self) -> list[LocalRunView]:
        return [run.view() for run in self._runs.values()]

    async def wait_for_run(self, local_run_id: str, *, timeout: float | None = None) -> LocalRunView:
        run = self._get(local_run_id)
        await asyncio.wait_for(run.done.wait(), timeout=timeout)
        return run.view()

    def _get(self, local_run_id: str) -> LocalRun:
        run = self._runs.get(local_run_id)
        if run is None:
            raise NotFoundError(
                f"Run '{local_run_id}' not found on runtime instance '{self.runtime_instance_id}'.",
                hint="Check the RunId.",
            )
        return run

    # Cancellation

    async def cancel_queued_run(
        self, local_run_id: str, *, reason: str = "", requested_by: str = ""
    ) -> LocalRunView:
        """Cancel before execution creation: Cancelled, no ExecutionId, no DAG state."""
        run = self._get(local_run_id)
        if run.record.status is not LocalRunStatus.QUEUED:
            raise ConflictError(
                f"Run '{local_run_id}' is {run.record.status.value}, not Queued.",
                hint="Use cancel_run to cancel a running run.",
            )
        self._queue.remove(run)
        await self._finish(
            run, LocalRunStatus.CANCELLED, reason or f"cancelled by {requested_by or 'operator'}"
        )
        return run.view()

    async def cancel_run(
        self, local_run_id: str, *, reason: str = "", requested_by: str = ""
    ) -> LocalRunView:
        """Queued: cancel at once. Running: execution control cancels its ExecutionId."""
        run = self._get(local_run_id)
        if run.record.status is LocalRunStatus.QUEUED:
            return await self.cancel_queued_run(local_run_id, reason=reason, requested_by=requested_by)
        if run.record.status is LocalRunStatus.RUNNING:
            run.cancel_requested = True
            # Before its DAG exists the run cancels it itself once it is created (cancel before start).
            if run.record.execution_id and run.opened:
                await self.deps.canceller.cancel(run.record.execution_id, run.snapshot, reason=reason)
        return run.view()

    # Background controller

    async def _control_loop(self) -> None:
        while True:
            run = self._next_startable()
            if run is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._start(run)

    def _next_startable(self) -> LocalRun | None:
        s = self.settings
        if self._fenced is not None:
            return None
        if self._paused or not self._queue or len(self._tasks) >= s.max_concurrent_runs:
            return None
        return self._queue.popleft()

    def _start(self, run: LocalRun) -> None:
        s = self.settings
        usable = min(s.worker_count, s.max_local_workers_per_execution)
        # Never more engine workers than its pipeline's maxDegreeOfParallelism.
        run.effective_workers = min(usable, parallelism_limit(run.request.pipeline.config) or usable)
        run.record = run.record.model_copy(update={"status": LocalRunStatus.RUNNING})
        self._tasks[run.record.local_run_id] = asyncio.create_task(
            self._execute(run), name=f"{self.runtime_instance_id}:{run.record.local_run_id}"
        )

    async def _execute(self, run: LocalRun) -> None:
        outcome: tuple[LocalRunStatus, str | None] | TakenOver
        try:
            outcome = await self._run_execution(run)
        except TakenOver as exc:
            outcome = exc
        except asyncio.CancelledError:
            self._release(run)
            if self._fenced is None or self._stopping.is_set():
                raise
            self._abandon(run, self._fenced)  # cancelled by `_fence`: the run is recovery's
            return
        except Exception as exc:  # a broken run must not stop the controller
            log.exception("local_run.failed", extra={"local_run_id": run.record.local_run_id})
            outcome = LocalRunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        self._release(run)
        if isinstance(outcome, TakenOver):
            self._abandon(run, str(outcome))
            return
        await self._finish(run, *outcome, until_stored=True)

    async def _run_execution(self, run: LocalRun) -> tuple[LocalRunStatus, str | None]:
        engine = copy.copy(self.deps.engine)
        engine.instance_id = self.runtime_instance_id
        engine.owner = run.record.local_run_id
        engine.worker_permits = self._permits
        execution_id = run.execution_id
        with restored_snapshot(run.snapshot):
            # A heartbeat before anything else: an incarnation fenced while it was paused or
            # cut off learns it here, before it starts a run recovery may have taken over (one
            # already on its way, e.g. the enqueue's, was sent after this process woke too).
            await self._publish_quietly(join_in_flight=True)
            if self._fenced is not None:
                raise TakenOver(self._fenced)
            await self._until_available(
                lambda: self._record_started(run, execution_id), "local_run.record_started"
            )
            await self._until_available(lambda: self._open_execution(engine, run), "local_run.open_execution")
            run.opened = True  # from now on `cancel_run` cancels the execution itself
            if run.cancel_requested:
                await self._until_available(
                    lambda: self.deps.canceller.cancel(
                        execution_id, run.snapshot, reason="cancelled before start"
                    ),
                    "local_run.cancel_before_start",
                )
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
                    await self._wait_until_unparked(engine, execution_id, final, rung)
                    final = await engine.run(execution_id, workers=run.effective_workers, watched=True)
            except NotFoundError:
                return ""
        return final

    async def _after_hot_state_vanished(
        self, engine: DagEngine, run: LocalRun, execution_id: str
    ) -> tuple[LocalRunStatus, str | None]:
        """The execution's DAG is gone: when the Redis dataset was lost, restore the execution
        from its durable copy and continue it, or fail the run with `hot_state_lost`."""
        await self._rejoined_after_loss()
        if run.epoch == self._incarnation.epoch:
            return LocalRunStatus.FAILED, "execution finished without a status (its hot state vanished)"
        run.epoch = self._incarnation.epoch
        restorer = self.deps.restorer
        if restorer is not None and await restorer.restore_execution(execution_id, run.snapshot):
            log.warning(
                "local_run.restored_after_hot_state_loss local_run_id=%s execution_id=%s",
                run.record.local_run_id,
                execution_id,
                extra=self._log_fields(local_run_id=run.record.local_run_id, execution_id=execution_id),
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
        started_at = await self._clock.now_ms()
        run.epoch = self._incarnation.epoch  # the dataset its execution will live in
        await self._swap(
            run, status=LocalRunStatus.RUNNING, execution_id=execution_id, started_at_ms=started_at
        )

    async def _swap(self, run: LocalRun, **changes: object) -> None:
        """Write the run's record by compare-and-set on the revision this incarnation wrote."""
        swap = await self._try_swap(run, changes)
        if not swap.applied and swap.record is None:  # no record: the dataset may have been lost
            await self._rejoined_after_loss()  # (or was, concurrently: the record is back then)
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
        self, engine: DagEngine, execution_id: str, parked_status: str, rung: asyncio.Event
    ) -> None:
        """Parked (its workers idle, holding no permit): wait until another actor unparks it.
        The doorbell rings on its resume / input / cancel; the control state is re-read after
        each ring and, in case a ring was missed, with backoff."""
        doorbell, status = self.deps.doorbell, parked_status
        delay = doorbell.first_wait_s
        while status in PARKED_CONTROL_STATUSES:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(rung.wait(), delay)
            rung.clear()
            delay = min(doorbell.longest_wait_s, delay * 2)
            status = await self._until_available(
                lambda: engine.store.control_status(execution_id), "local_run.control_status"
            )

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
            TARGET_INCARNATION_KEY: self.incarnation,
            "runtime.instance.id": s.runtime_instance_id,
            "assigned.runtime.instance.id": s.runtime_instance_id,
            "max.local.workers.per.execution": str(s.max_local_workers_per_execution),
            "effective.worker.count.per.execution": str(run.effective_workers),
        }

    def _release(self, run: LocalRun) -> None:
        """Free the run's slot (its workers' permits went back with their last round)."""
        self._tasks.pop(run.record.local_run_id, None)
        self._wake.set()  # a queued run may take the freed slot

    async def _finish(
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
            self._mark_taken_over(run, str(exc))
        finally:
            run.done.set()
            self._forget_old_finished(run)
            self._wake.set()
        await self._publish_quietly()

    async def _record_finished(self, run: LocalRun, status: LocalRunStatus, reason: str | None) -> None:
        completed_at = await self._clock.now_ms()
        await self._swap(run, status=status, failure_reason=reason, completed_at_ms=completed_at)
        if self.deps.events is not None:  # after the record: a listener reading the run finds it done
            await self.deps.events.publish(local_run_end(run.record))

    def _abandon(self, run: LocalRun, reason: str) -> None:
        """The run is no longer this incarnation's: it ends here without any write."""
        self._mark_taken_over(run, reason)
        run.done.set()
        self._forget_old_finished(run)
        self._wake.set()

    @staticmethod
    def _mark_taken_over(run: LocalRun, reason: str) -> None:
        run.record = run.record.model_copy(
            update={"status": LocalRunStatus.FAILED, "failure_reason": f"taken over: {reason}"}
        )

    def _forget_old_finished(self, run: LocalRun) -> None:
        self._finished.append(run.record.local_run_id)
        while len(self._finished) > FINISHED_RUNS_KEPT:
            forgotten = self._runs.pop(self._finished.popleft(), None)
            if forgotten is not None and forgotten.request.dispatch_attempt_id:
                self._attempts.pop(forgotten.request.dispatch_attempt_id, None)

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat_interval_ms / 1000
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=interval)
            if self._stopping.is_set() or self._fenced is not None:
                return
            try:
                await self.publish()
                await self._incarnation.keep_listed()
            except Exception as exc:  # a missed heartbeat makes the instance stale; the next one retries
                log.warning(
                    "instance.heartbeat_failed runtime_instance_id=%s",
                    self.runtime_instance_id,
                    extra={"runtime_instance_id": self.runtime_instance_id, "error": str(exc)},
                )
