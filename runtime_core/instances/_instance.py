"""A runtime instance: local queue + background controller + workers running `DagEngine.run`.

Owns the instance's face: its lifecycle (start, stop), accepting runs (hot enqueue, also
while running or paused; a run without a snapshot is refused; a shared-run dispatch attempt
is accepted at most once: the same attempt again gets the run it created while this instance
still knows it, and an attempt the dispatcher already abandoned is refused, see the run
index), queue pause / resume, run views, cancellation (a queued run is cancelled before any
ExecutionId exists; a running one through execution control by its ExecutionId), the
controller that starts queued runs into free run slots, and the registry and capacity
descriptors of its state. Its `Membership` keeps the registration, its `RunDriver` carries
each started run to its end. Must not read tenants from anything but the snapshot, nor touch
another instance's runs. Its `InstanceAssistance` asks for help for its wide runs and lends its
idle workers to other instances' (execution assistance).
"""

from __future__ import annotations

import asyncio

from runtime_core.dag import WorkerPermits
from runtime_core.errors import ConflictError, FencedError, MissingSnapshotError
from runtime_core.hot_state import ServerClock, read_outcome
from runtime_core.identity import new_local_run_id
from runtime_core.instances._assistance import InstanceAssistance
from runtime_core.instances._dependencies import InstanceDependencies
from runtime_core.instances._descriptors import (
    InstanceLoad,
    accepts_runs,
    instance_capacity,
    instance_descriptor,
)
from runtime_core.instances._local_queue import LocalQueue
from runtime_core.instances._local_run import LocalRun
from runtime_core.instances._membership import Membership
from runtime_core.instances._models import (
    CapacityDescriptor,
    InstanceDescriptor,
    LocalRunRequest,
    LocalRunStatus,
    LocalRunView,
    QueueStateView,
    RuntimeInstanceSettings,
)
from runtime_core.instances._run_driver import RunDriver
from runtime_core.instances._run_index import RunIndexRecord


class RuntimeInstance:
    """`await instance.start()`, then `enqueue` runs; `stop()` unregisters it."""

    def __init__(self, settings: RuntimeInstanceSettings, deps: InstanceDependencies) -> None:
        self.settings = settings
        self.deps = deps
        self._queue = LocalQueue(settings.runtime_instance_id)
        self._permits = WorkerPermits(settings.worker_count)
        self._clock = ServerClock(deps.registry.hot_state)  # its local runs' timestamps
        self._stopping = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self._membership = Membership(
            settings, deps, self._queue, self._stopping, self._describe, self._accepts_runs
        )
        self._assistance = InstanceAssistance(settings, deps, self._queue, self._membership, self._permits)
        requester = self._assistance.requester if self._assistance.enabled else None
        self._driver = RunDriver(
            settings, deps, self._queue, self._membership, self._permits, self._clock, assistance=requester
        )

    @property
    def runtime_instance_id(self) -> str:
        return self.settings.runtime_instance_id

    @property
    def incarnation(self) -> str:
        """This start's incarnation token ("" before `start()`)."""
        return self._membership.incarnation.id

    @property
    def fenced(self) -> str | None:
        """Why this incarnation was fenced (it takes no more work), None while it is live."""
        return self._membership.fenced

    @property
    def assistance(self) -> InstanceAssistance:
        """Its wide runs' requests for help, and the executions its idle workers assist."""
        return self._assistance

    @property
    def loops_alive(self) -> bool:
        """Controller and heartbeat started and neither ended (readiness reads this)."""
        return bool(self._loops) and not any(loop.done() for loop in self._loops)

    # Lifecycle

    async def start(self) -> RuntimeInstance:
        """Register a new incarnation (taking the id over from any predecessor) and start."""
        await self._membership.register()
        self.deps.doorbell.listen()  # listening before any of its runs parks
        self._loops = [
            asyncio.create_task(self._control_loop(), name=f"{self.runtime_instance_id}:controller"),
            asyncio.create_task(
                self._membership.heartbeat_loop(), name=f"{self.runtime_instance_id}:heartbeat"
            ),
        ]
        if self._assistance.enabled:
            self._loops.append(
                asyncio.create_task(self._assistance.loop(), name=f"{self.runtime_instance_id}:assistance")
            )
        return self

    async def stop(self, *, unregister: bool = True) -> None:
        """Stop the controller, heartbeat and workers (their DAGs stay in Redis for recovery).

        `unregister`: retire the registration; unfinished local runs are handed to recovery.
        """
        unfinished = len(self._queue.live())
        self._stopping.set()
        tasks = [*self._loops, *self._queue.running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loops = []
        if unregister:
            await self._membership.retire(unfinished=unfinished)

    # Descriptors

    def _describe(self) -> tuple[InstanceDescriptor, CapacityDescriptor]:
        return self.descriptor(), self.capacity()

    def _accepts_runs(self) -> bool:
        queue = self._queue
        closed = queue.paused or self._stopping.is_set() or self.fenced is not None
        return accepts_runs(
            self.settings, queued=len(queue.queued), running=len(queue.running), closed=closed
        )

    def _load(self) -> InstanceLoad:
        seat = self._assistance.seat
        parked = self._queue.parked_counts()
        return InstanceLoad(
            incarnation=self.incarnation,
            queued=len(self._queue.queued),
            running=len(self._queue.running),
            waiting_for_input=parked["WaitingForInput"],
            paused_runs=parked["Paused"],
            active_workers=self._permits.in_use,
            paused=self._queue.paused,
            stopping=self._stopping.is_set(),
            fenced=self.fenced is not None,
            assistance_workers=self._assistance.offered_workers(),
            assisting_executions=1 if seat is not None else 0,
            assisting_workers=seat.workers if seat is not None else 0,
        )

    def descriptor(self) -> InstanceDescriptor:
        return instance_descriptor(self.settings, self._load())

    def capacity(self) -> CapacityDescriptor:
        return instance_capacity(self.settings, self._load())

    def queue_state(self) -> QueueStateView:
        return self._queue.state()

    async def publish(self, *, join_in_flight: bool = False) -> None:
        """Heartbeat now (see `Membership.publish`)."""
        await self._membership.publish(join_in_flight=join_in_flight)

    # Local queue

    async def enqueue(self, request: LocalRunRequest) -> LocalRunView:
        """Hot enqueue (also while running or paused); the run gets a LocalRunId, no ExecutionId yet."""
        if request.snapshot is None:
            raise MissingSnapshotError(
                f"Runtime instance '{self.runtime_instance_id}' refuses a run without an "
                "ExecutionContextSnapshot.",
                hint="Dispatch the run with the snapshot captured at submission.",
            )
        known = self._queue.known_attempt(request)
        if known is not None:
            return known.view()
        attempt_id = request.dispatch_attempt_id
        accepting = self._queue.accepting.get(attempt_id) if attempt_id else None
        if accepting is not None:  # the same attempt again (a provider retry) while it is stored
            return (await asyncio.shield(accepting)).view()
        self._check_accepting(request)
        # Accepts run concurrently (a pump dispatches a claim batch at once): their index
        # writes and the capacity publication after them share round trips.
        accepted: asyncio.Future[LocalRun] = asyncio.get_running_loop().create_future()
        accepted.add_done_callback(read_outcome)
        key = attempt_id or object()
        self._queue.accepting[key] = accepted
        try:
            run = await self._accept(request)
        except BaseException as exc:
            accepted.set_exception(exc)
            raise
        finally:
            del self._queue.accepting[key]
        accepted.set_result(run)
        self._queue.wake.set()
        await self._membership.publish_quietly()
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
        run = LocalRun(request, record, record, self._membership.incarnation.epoch)
        self._queue.add(run)
        if request.shared_run_id:
            self._membership.incarnation.counted(request.shared_run_id)  # frees its dispatcher's reservation
        return run

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
        if self.fenced is not None:
            raise FencedError(
                f"Runtime instance '{self.runtime_instance_id}' incarnation '{self.incarnation}' is "
                f"fenced ({self.fenced}) and takes no more work.",
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
        if len(self._queue.queued) + len(self._queue.accepting) >= self.settings.local_queue_capacity:
            raise ConflictError(
                f"Local queue of '{self.runtime_instance_id}' is full "
                f"({self.settings.local_queue_capacity} queued runs).",
                hint="Wait for queued runs to start, or dispatch elsewhere.",
            )

    async def pause_queue(self, *, reason: str = "", requested_by: str = "") -> QueueStateView:
        """Queued runs stay Queued (no ExecutionId); running executions continue."""
        self._queue.pause(reason=reason, requested_by=requested_by)
        await self.publish()
        return self.queue_state()

    async def resume_queue(self, *, requested_by: str = "") -> QueueStateView:
        self._queue.resume(requested_by=requested_by)
        await self.publish()
        self._queue.wake.set()
        return self.queue_state()

    def run_view(self, local_run_id: str) -> LocalRunView:
        return self._queue.get(local_run_id).view()

    def local_runs(self) -> list[LocalRunView]:
        return [run.view() for run in self._queue.runs.values()]

    async def wait_for_run(self, local_run_id: str, *, timeout: float | None = None) -> LocalRunView:
        run = self._queue.get(local_run_id)
        await asyncio.wait_for(run.done.wait(), timeout=timeout)
        return run.view()

    # Cancellation

    async def cancel_queued_run(
        self, local_run_id: str, *, reason: str = "", requested_by: str = ""
    ) -> LocalRunView:
        """Cancel before execution creation: Cancelled, no ExecutionId, no DAG state."""
        run = self._queue.get(local_run_id)
        if run.record.status is not LocalRunStatus.QUEUED:
            raise ConflictError(
                f"Run '{local_run_id}' is {run.record.status.value}, not Queued.",
                hint="Use cancel_run to cancel a running run.",
            )
        self._queue.queued.remove(run)
        await self._driver.finish(
            run, LocalRunStatus.CANCELLED, reason or f"cancelled by {requested_by or 'operator'}"
        )
        return run.view()

    async def cancel_run(
        self, local_run_id: str, *, reason: str = "", requested_by: str = ""
    ) -> LocalRunView:
        """Queued: cancel at once. Running: execution control cancels its ExecutionId."""
        run = self._queue.get(local_run_id)
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
        wake = self._queue.wake
        while True:
            run = self._next_startable()
            if run is None:
                wake.clear()
                await wake.wait()
                continue
            self._driver.start(run)

    def _next_startable(self) -> LocalRun | None:
        if self.fenced is not None:
            return None
        return self._queue.next_startable(self.settings.max_concurrent_runs)
