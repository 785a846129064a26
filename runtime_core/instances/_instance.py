"""A runtime instance: local queue + background controller + workers running `DagEngine.run`.

Owns the local RunId lifecycle (Queued, Running, Completed, Failed, Cancelled), worker
accounting (`min(worker_count, max_local_workers_per_execution, available)` per execution;
a run waits for a worker instead of failing; a parked run, paused or waiting for input,
gives its workers back but keeps its run slot, and takes workers again once unparked, before
new runs start), queue pause / resume, hot enqueue, queued-run cancellation (no ExecutionId
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
Must not read tenants from anything but the snapshot, nor touch another instance's runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from runtime_core.concurrency import parallelism_limit
from runtime_core.dag import PARKED_CONTROL_STATUSES, DagEngine, ReassignOutcome
from runtime_core.errors import ConflictError, MissingSnapshotError, NotFoundError, StoreUnavailableError
from runtime_core.hot_state import retry_while_unavailable
from runtime_core.identity import (
    ExecutionContextSnapshot,
    new_execution_id,
    new_local_run_id,
    restored_snapshot,
)
from runtime_core.instances._dependencies import InstanceDependencies
from runtime_core.instances._models import (
    PROVIDER_NAME_KEY,
    TRANSPORT_ENDPOINT_KEY,
    TRANSPORT_NAME_KEY,
    CapacityDescriptor,
    InstanceDescriptor,
    LocalRunRequest,
    LocalRunStatus,
    LocalRunView,
    QueueStateView,
    RuntimeInstanceSettings,
)
from runtime_core.instances._run_events import local_run_end
from runtime_core.instances._run_index import RunIndexRecord

log = logging.getLogger("runtime_core.instances")

_T = TypeVar("_T")

# Finished local runs kept in memory for `run_view` / `wait_for_run`; older ones are
# dropped (their index records stay in Redis), so memory stays bounded under load.
FINISHED_RUNS_KEPT = 1_000


@dataclass
class _LocalRun:
    request: LocalRunRequest
    record: RunIndexRecord
    # Workers the run holds now (0 while parked or waiting for workers again); once it
    # finished, the count it last ran with.
    effective_workers: int = 0
    cancel_requested: bool = False
    # Set once `cancel_run` cancelled the execution: its claims are blocked for good.
    execution_cancelled: bool = False
    new_execution_id: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # Set by the controller when it hands an unparked run workers again (or by `cancel_run`).
    workers_granted: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def snapshot(self) -> ExecutionContextSnapshot:
        assert self.request.snapshot is not None
        return self.request.snapshot

    def view(self) -> LocalRunView:
        r = self.record
        return LocalRunView(
            local_run_id=r.local_run_id,
            shared_run_id=r.shared_run_id,
            runtime_instance_id=r.runtime_instance_id,
            status=r.status,
            execution_id=r.execution_id,
            effective_workers=self.effective_workers,
            failure_reason=r.failure_reason,
            created_at_ms=r.created_at_ms,
            started_at_ms=r.started_at_ms,
            completed_at_ms=r.completed_at_ms,
        )


def _resume_target_missing(execution_id: str) -> NotFoundError:
    return NotFoundError(
        f"Execution '{execution_id}' to resume was not found.",
        hint="Its hot state is gone; replay it from its terminal snapshot.",
    )


class RuntimeInstance:
    """`await instance.start()`, then `enqueue` runs; `stop()` unregisters it."""

    def __init__(self, settings: RuntimeInstanceSettings, deps: InstanceDependencies) -> None:
        self.settings = settings
        self.deps = deps
        self._runs: dict[str, _LocalRun] = {}
        self._attempts: dict[str, str] = {}  # dispatch attempt id -> LocalRunId, while in `_runs`
        self._finished: deque[str] = deque()
        self._queue: deque[_LocalRun] = deque()
        self._resuming: deque[_LocalRun] = deque()  # unparked runs waiting for workers, oldest first
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._active_workers = 0
        self._paused = False
        self._pause_reason: str | None = None
        self._pause_requested_by: str | None = None
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._enqueue_lock = asyncio.Lock()
        self._publish_lock = asyncio.Lock()
        self._version = 0
        self._loops: list[asyncio.Task[None]] = []

    @property
    def runtime_instance_id(self) -> str:
        return self.settings.runtime_instance_id

    @property
    def loops_alive(self) -> bool:
        """Controller and heartbeat started and neither ended (readiness reads this)."""
        return bool(self._loops) and not any(loop.done() for loop in self._loops)

    # Lifecycle

    async def start(self) -> RuntimeInstance:
        async with self._publish_lock:
            self._version += 1
            await self.deps.registry.register(self.descriptor(), self.capacity(), self._version)
        self._loops = [
            asyncio.create_task(self._control_loop(), name=f"{self.runtime_instance_id}:controller"),
            asyncio.create_task(self._heartbeat_loop(), name=f"{self.runtime_instance_id}:heartbeat"),
        ]
        return self

    async def stop(self, *, unregister: bool = True) -> None:
        """Stop the controller, heartbeat and workers (their DAGs stay in Redis for recovery)."""
        self._stopping.set()
        tasks = [*self._loops, *self._tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loops = []
        if unregister:
            await self.deps.registry.unregister(self.runtime_instance_id)

    # Descriptors

    def descriptor(self) -> InstanceDescriptor:
        s = self.settings
        return InstanceDescriptor(
            runtime_instance_id=s.runtime_instance_id,
            role=s.role,
            status="Stopping" if self._stopping.is_set() else ("Paused" if self._paused else "Ready"),
            host=s.host,
            isolation_mode=s.isolation_mode,
            tenant_id=s.tenant_id,
            tenant_group_id=s.tenant_group_id,
            prefer_dedicated_capacity=s.prefer_dedicated_capacity,
            allow_shared_fallback=s.allow_shared_fallback,
            runtime_instance_id_prefix=s.runtime_instance_id_prefix,
            metadata={
                **s.metadata,
                PROVIDER_NAME_KEY: s.provider_name,
                TRANSPORT_NAME_KEY: s.transport_name,
                TRANSPORT_ENDPOINT_KEY: s.transport_endpoint or f"inproc://{s.runtime_instance_id}",
            },
        )

    def capacity(self) -> CapacityDescriptor:
        s = self.settings
        queued, running = len(self._queue), len(self._tasks)
        available_workers = s.worker_count - self._active_workers
        slots = max(0, s.max_concurrent_runs - queued - running)
        can_accept = (
            not self._paused and queued < s.local_queue_capacity and slots > 0 and available_workers > 0
        )
        return CapacityDescriptor(
            runtime_instance_id=s.runtime_instance_id,
            worker_count=s.worker_count,
            active_workers=self._active_workers,
            available_workers=available_workers,
            max_local_workers_per_execution=s.max_local_workers_per_execution,
            queued=queued,
            running=running,
            active_runs=queued + running,
            queue_capacity=s.local_queue_capacity,
            max_concurrent_runs=s.max_concurrent_runs,
            available_run_slots=slots,
            queue_paused=self._paused,
            can_accept_run=can_accept and not self._stopping.is_set(),
            tenant_id=s.tenant_id,
            tenant_group_id=s.tenant_group_id,
            isolation_mode=s.isolation_mode,
            prefer_dedicated_capacity=s.prefer_dedicated_capacity,
            allow_shared_fallback=s.allow_shared_fallback,
            runtime_instance_id_prefix=s.runtime_instance_id_prefix,
            provider_name=s.provider_name,
            transport_name=s.transport_name,
            provider_endpoint=s.transport_endpoint or f"inproc://{s.runtime_instance_id}",
        )

    def queue_state(self) -> QueueStateView:
        return QueueStateView(
            runtime_instance_id=self.runtime_instance_id,
            paused=self._paused,
            reason=self._pause_reason,
            requested_by=self._pause_requested_by,
            queued=len(self._queue),
            running=len(self._tasks),
        )

    async def publish(self) -> None:
        """Heartbeat now: registry + capacity descriptors with a fresh version."""
        async with self._publish_lock:
            self._version += 1
            await self.deps.registry.heartbeat(self.descriptor(), self.capacity(), self._version)

    async def _publish_quietly(self) -> None:
        """Publish after a local change; with Redis down the next heartbeat publishes it."""
        try:
            await self.publish()
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
        async with self._enqueue_lock:
            known = self._known_attempt(request)
            if known is not None:
                return known.view()
            self._check_accepting()
            record = RunIndexRecord(
                local_run_id=new_local_run_id(),
                shared_run_id=request.shared_run_id,
                runtime_instance_id=self.runtime_instance_id,
                status=LocalRunStatus.QUEUED,
                execution_id=request.resume_execution_id,
                created_at_ms=await self.deps.registry.hot_state.server_time_ms(),
                snapshot=request.snapshot,
                metadata=dict(request.attributes),
            )
            await self._store_accepted(record, request.dispatch_attempt_id)
            run = _LocalRun(request, record)
            self._runs[record.local_run_id] = run
            if request.dispatch_attempt_id:
                self._attempts[request.dispatch_attempt_id] = record.local_run_id
            self._queue.append(run)
        self._wake.set()
        await self._publish_quietly()
        return run.view()

    def _known_attempt(self, request: LocalRunRequest) -> _LocalRun | None:
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

    def _check_accepting(self) -> None:
        if self._stopping.is_set() or not self._loops:
            raise ConflictError(
                f"Runtime instance '{self.runtime_instance_id}' is not running.",
                hint="Dispatch to another runtime instance.",
            )
        if len(self._queue) >= self.settings.local_queue_capacity:
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

    def _get(self, local_run_id: str) -> _LocalRun:
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
            if run.record.execution_id:
                await self.deps.canceller.cancel(run.record.execution_id, run.snapshot, reason=reason)
                run.execution_cancelled = True
                run.workers_granted.set()  # a run waiting for workers again only finalizes now
        return run.view()

    # Background controller

    async def _control_loop(self) -> None:
        while True:
            self._serve_resuming()
            run = self._next_startable()
            if run is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._start(run)

    def _serve_resuming(self) -> None:
        """Hand free workers to unparked runs, oldest first, before any queued run starts.

        Fairness choice: an unparked run already holds a run slot and has done part of its
        work, so it is served before `_next_startable` starts new runs; a stream of queued
        runs can then never starve it. New runs are not starved either: a resumed run takes
        workers as soon as one is free, so `_resuming` only blocks them while none is free.
        The queue pause does not apply: resumed runs are running runs, not queued ones.
        """
        while self._resuming and self._free_workers() > 0:
            run = self._resuming.popleft()
            self._hold_workers(run)
            run.workers_granted.set()

    def _next_startable(self) -> _LocalRun | None:
        s = self.settings
        if self._paused or not self._queue or len(self._tasks) >= s.max_concurrent_runs:
            return None
        if self._resuming or self._free_workers() <= 0:
            return None
        return self._queue.popleft()

    def _free_workers(self) -> int:
        return self.settings.worker_count - self._active_workers

    def _hold_workers(self, run: _LocalRun) -> None:
        """Hold the workers the run can use: never more than its pipeline's maxDegreeOfParallelism."""
        s = self.settings
        usable = min(s.worker_count, s.max_local_workers_per_execution, self._free_workers())
        run.effective_workers = min(usable, parallelism_limit(run.request.pipeline.config) or usable)
        self._active_workers += run.effective_workers

    def _start(self, run: _LocalRun) -> None:
        self._hold_workers(run)
        run.record = run.record.model_copy(update={"status": LocalRunStatus.RUNNING})
        self._tasks[run.record.local_run_id] = asyncio.create_task(
            self._execute(run), name=f"{self.runtime_instance_id}:{run.record.local_run_id}"
        )

    async def _execute(self, run: _LocalRun) -> None:
        try:
            status, reason = await self._run_execution(run)
        except asyncio.CancelledError:
            self._release(run)
            raise
        except Exception as exc:  # a broken run must not stop the controller
            log.exception("local_run.failed", extra={"local_run_id": run.record.local_run_id})
            status, reason = LocalRunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        self._release(run)
        await self._finish(run, status, reason, until_stored=True)

    async def _run_execution(self, run: _LocalRun) -> tuple[LocalRunStatus, str | None]:
        engine = copy.copy(self.deps.engine)
        engine.instance_id = self.runtime_instance_id
        with restored_snapshot(run.snapshot):
            execution_id = await self._until_available(
                lambda: self._open_execution(engine, run), "local_run.open_execution"
            )
            run.record = await self._until_available(
                lambda: self._record_started(run, execution_id), "local_run.record_started"
            )
            await self._publish_quietly()
            if run.cancel_requested:
                await self._until_available(
                    lambda: self.deps.canceller.cancel(
                        execution_id, run.snapshot, reason="cancelled before start"
                    ),
                    "local_run.cancel_before_start",
                )
            final = await engine.run(execution_id, workers=run.effective_workers)
            while final in PARKED_CONTROL_STATUSES:
                final = await self._advance_after_park(engine, run, execution_id)
        if final in (LocalRunStatus.COMPLETED, LocalRunStatus.CANCELLED):
            return LocalRunStatus(final), None
        return LocalRunStatus.FAILED, f"execution finished {final or 'without a status'}"

    async def _record_started(self, run: _LocalRun, execution_id: str) -> RunIndexRecord:
        started_at = await self.deps.registry.hot_state.server_time_ms()
        return await self.deps.index.update(run.record, execution_id=execution_id, started_at_ms=started_at)

    async def _open_execution(self, engine: DagEngine, run: _LocalRun) -> str:
        """Create the run's execution, or continue the recovered one it resumes (same ExecutionId).

        The new ExecutionId is chosen once per run, so a creation retried after a lost reply
        finds the DAG it already created instead of making a second one.
        """
        execution_id = run.request.resume_execution_id
        if execution_id is None:
            run.new_execution_id = run.new_execution_id or new_execution_id()
            return await engine.create_execution(
                run.request.pipeline,
                run.request.input,
                run.snapshot,
                execution_id=run.new_execution_id,
                attributes=self._attributes(run),
            )
        meta = await engine.store.load_meta(execution_id)
        if meta is None or meta.snapshot is None or meta.snapshot.tenant_id != run.snapshot.tenant_id:
            raise _resume_target_missing(execution_id)
        outcome = await engine.reassign_execution(execution_id, run.snapshot, self._attempt_attributes(run))
        if outcome is ReassignOutcome.EXECUTION_MISSING:
            raise _resume_target_missing(execution_id)
        return execution_id

    async def _advance_after_park(self, engine: DagEngine, run: _LocalRun, execution_id: str) -> str:
        """Parked: give the workers back until it is unparked, then hold workers and advance again."""
        await self._give_workers_back(run)
        await self._wait_until_unparked(engine, execution_id)
        if await self._take_workers_again(run):
            return await engine.run(execution_id, workers=run.effective_workers)
        # Cancelled through `cancel_run` before workers were free: its claims are blocked for
        # good, so this one engine worker only finalizes it and takes none of the instance's.
        return await engine.run(execution_id, workers=1)

    async def _give_workers_back(self, run: _LocalRun) -> None:
        """A parked run keeps its run slot (it still counts as running) but not its workers."""
        self._active_workers -= run.effective_workers
        run.effective_workers = 0
        self._wake.set()  # queued or resumed runs may take the freed workers
        await self._publish_quietly()

    async def _take_workers_again(self, run: _LocalRun) -> bool:
        """Wait, without polling, until the controller hands this unparked run workers again.

        False when `cancel_run` cancelled the execution first (the run then holds none).
        An execution cancelled by ExecutionId elsewhere waits for workers, then finalizes.
        """
        if run.execution_cancelled:
            return False
        run.workers_granted.clear()
        self._resuming.append(run)
        self._wake.set()
        try:
            await run.workers_granted.wait()
        finally:
            if run in self._resuming:  # woken by cancel_run, or the task was cancelled (stop)
                self._resuming.remove(run)
        await self._publish_quietly()
        return run.effective_workers > 0

    async def _wait_until_unparked(self, engine: DagEngine, execution_id: str) -> None:
        """Poll a paused or input-waiting run's control state with backoff (another actor unparks it)."""
        delay = 0.02

        async def control_status() -> str | None:
            return await self._until_available(
                lambda: engine.store.control_status(execution_id), "local_run.control_status"
            )

        while await control_status() in PARKED_CONTROL_STATUSES:
            await asyncio.sleep(delay)  # waiting on another actor's resume / input, not syncing
            delay = min(0.5, delay * 2)

    def _attributes(self, run: _LocalRun) -> dict[str, str]:
        s, snapshot = self.settings, run.snapshot
        return {
            **run.request.attributes,
            "shared_run_id": run.record.shared_run_id or "",
            **self._attempt_attributes(run),
            "tenant.id": snapshot.tenant_id,
            "tenant.groupId": snapshot.tenant_group_id or "",
            "runtime.isolation.mode": s.isolation_mode.value,
        }

    def _attempt_attributes(self, run: _LocalRun) -> dict[str, str]:
        """The execution attributes naming this run attempt (replaced when another one resumes it)."""
        s = self.settings
        return {
            "local_run_id": run.record.local_run_id,
            "runtime.instance.id": s.runtime_instance_id,
            "assigned.runtime.instance.id": s.runtime_instance_id,
            "max.local.workers.per.execution": str(s.max_local_workers_per_execution),
            "effective.worker.count.per.execution": str(run.effective_workers),
        }

    def _release(self, run: _LocalRun) -> None:
        """Free the run's slot and the workers it holds now (none while parked or waiting)."""
        self._active_workers -= run.effective_workers
        self._tasks.pop(run.record.local_run_id, None)
        self._wake.set()  # resumed or queued runs may take the freed workers and slot

    async def _finish(
        self, run: _LocalRun, status: LocalRunStatus, reason: str | None, *, until_stored: bool = False
    ) -> None:
        """Record the terminal status (retrying while Redis is down when `until_stored`)."""
        try:
            if until_stored:
                await self._until_available(
                    lambda: self._record_finished(run, status, reason), "local_run.record_finished"
                )
            else:
                await self._record_finished(run, status, reason)
        finally:
            run.done.set()
            self._forget_old_finished(run)
            self._wake.set()
        await self._publish_quietly()

    async def _record_finished(self, run: _LocalRun, status: LocalRunStatus, reason: str | None) -> None:
        completed_at = await self.deps.registry.hot_state.server_time_ms()
        run.record = run.record.model_copy(
            update={"status": status, "failure_reason": reason, "completed_at_ms": completed_at}
        )
        await self.deps.index.put(run.record)
        if self.deps.events is not None:  # after the record: a listener reading the run finds it done
            await self.deps.events.publish(local_run_end(run.record))

    def _forget_old_finished(self, run: _LocalRun) -> None:
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
            if self._stopping.is_set():
                return
            try:
                await self.publish()
            except Exception as exc:  # a missed heartbeat makes the instance stale; the next one retries
                log.warning(
                    "instance.heartbeat_failed runtime_instance_id=%s",
                    self.runtime_instance_id,
                    extra={"runtime_instance_id": self.runtime_instance_id, "error": str(exc)},
                )
