"""DagEngine: N stateless workers advancing one execution only through the DagStore.

Owns the worker loop: the control gate (blocked claims, Pausing -> Paused, Resuming ->
Running, prompt cancellation), the worker permit a round of claiming and running steps holds
when a runtime instance shares its workers (handed on after a time slice when wanted), the
claim path (batch claims when no step is concurrency gated, a long step handing the rest of
its batch back; otherwise admission -> lease -> single claim per step), the transitions after a step
ran (completion reported with the next claim, failure -> retry or Failed, parking for human
input), convergence and finalization, and riding out a Redis outage: a worker backs
off and retries while the store is unavailable, and a step's completion, failure or
release is retried with the same claim token (accepted at most once) instead of being
dropped. Also owns `validate`, the one full pipeline check: create time, shared-run submit
and the `pipelines.validate` tool all call it. Running the executor itself is the
`StepInvoker`'s; what the engine is configured with lives in `_engine_settings`. Must not
write state a Lua script guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from runtime_core.concurrency import (
    AdmissionDenial,
    ConcurrencyGate,
    LeaseDenial,
    LeaseGrant,
    parallelism_limit,
)
from runtime_core.dag._batching import ClaimSizer
from runtime_core.dag._engine_settings import (
    PARKED_CONTROL_STATUSES,
    SUPERSEDED_STATUS,
    ControlSettler,
    EngineSettings,
    InlineResults,
    InputReader,
    ParkHandler,
    ResultCodec,
    RetryDecider,
)
from runtime_core.dag._events import EngineEvent, ExecutionObserver, NullObserver
from runtime_core.dag._gating import StepGates, validate_step_policies
from runtime_core.dag._invocation import StepInvoker
from runtime_core.dag._keys import BLOCKING_CONTROL_STATUSES
from runtime_core.dag._step_tracing import NoStepTracing, StepTracing
from runtime_core.dag._store import (
    AdvanceResult,
    ClaimBatch,
    ClaimOutcome,
    DagStore,
    ExecutionMeta,
    FinalizeOutcome,
    ReassignOutcome,
    StepClaim,
    TransitionOutcome,
)
from runtime_core.dag._worker_permits import Permit, WorkerPermits
from runtime_core.dag._worker_state import Completion, ExecutionRun, Idle, WorkerPace
from runtime_core.errors import (
    ConflictError,
    InvalidPipelineError,
    NotFoundError,
    StoreUnavailableError,
)
from runtime_core.hot_state import StoreOutage, retry_while_unavailable
from runtime_core.identity import ExecutionContextSnapshot, new_execution_id, restored_snapshot
from runtime_core.pipeline import (
    PipelineDefinition,
    RetentionCheck,
    StepDefinition,
    check_size,
    dumps_strict,
    validate_pipeline,
)
from runtime_core.steps import (
    ExecutorRegistry,
    StepFailure,
    StepParked,
    check_step_configs,
    result_usage,
    usage_attributes,
)

log = logging.getLogger("runtime_core.dag")

# A batch of claimed steps is sized for steps that take less than a round trip; one running
# longer than this hands the rest of its batch back to idle workers.
HAND_BACK_AFTER_S = 0.05

_T = TypeVar("_T")


class DagEngine:
    def __init__(
        self,
        store: DagStore,
        executors: ExecutorRegistry,
        retry: RetryDecider,
        *,
        settings: EngineSettings | None = None,
        observer: ExecutionObserver | None = None,
        results: ResultCodec | None = None,
        instance_id: str = "local",
    ) -> None:
        self.store = store
        self.executors = executors
        self.retry = retry
        self.settings = settings or EngineSettings()
        self.observer: ExecutionObserver = observer or NullObserver()
        self.invoker = StepInvoker(store, executors, results or InlineResults(), self.settings)
        self.instance_id = instance_id
        # The local run this engine copy advances executions for ("" outside runtime instances):
        # claims are refused once recovery handed the execution to another local run.
        self.owner = ""
        # The process's worker permits, shared by every execution it advances (a runtime
        # instance sets them); None: each execution's workers run unbounded by others.
        self.worker_permits: WorkerPermits | None = None
        self.gate = ConcurrencyGate(store.hot_state)
        # Execution-control hooks; `runtime_core.control.attach_execution_control` sets them
        # (and `read_human_input`, kept by the invoker).
        self.on_park: ParkHandler | None = None
        self.settle_control: ControlSettler | None = None
        # The retention engine's `validate`; `runtime_core.bootstrap` sets it with the audit wiring.
        self.check_retention: RetentionCheck | None = None
        # Spans around step invocations; `runtime_core.bootstrap` sets it when tracing is on.
        self.step_tracing: StepTracing = NoStepTracing()
        # The metadata this engine just stored by creating an execution: the `run` that
        # follows starts from it instead of reading it back (consumed once).
        self._created: ExecutionMeta | None = None

    @property
    def results(self) -> ResultCodec:
        """How results travel between executors and Redis (the audit wiring sets its codec)."""
        return self.invoker.results

    @results.setter
    def results(self, codec: ResultCodec) -> None:
        self.invoker.results = codec

    @property
    def read_human_input(self) -> InputReader | None:
        return self.invoker.read_human_input

    @read_human_input.setter
    def read_human_input(self, reader: InputReader | None) -> None:
        self.invoker.read_human_input = reader

    async def create_execution(
        self,
        pipeline: PipelineDefinition,
        state: dict[str, Any],
        snapshot: ExecutionContextSnapshot | None,
        *,
        execution_id: str | None = None,
        attributes: dict[str, str] | None = None,
    ) -> str:
        """Validate pipeline, policies and input, then create the hot DAG state; returns the ExecutionId.

        A rejected pipeline or input raises a RuntimeCoreError and stores nothing.
        """
        self.check_input(state)
        self.validate(pipeline)
        execution_id = execution_id or new_execution_id()
        created = await self.store.create_execution(execution_id, pipeline, state, snapshot, attributes)
        self._created = created
        if created is not None:
            await self.observer.on_event(
                EngineEvent(
                    "execution.created",
                    execution_id,
                    snapshot,
                    attributes={"pipeline": pipeline.key},
                    meta=created,
                )
            )
        return execution_id

    def validate(self, pipeline: PipelineDefinition) -> None:
        """Every check `create_execution` makes on a pipeline: shape, step keys, retention, retry and
        concurrency policies, each step's config against its step type's config model, and that
        step configs name providers configured here. Submit and `pipelines.validate` call it so a
        bad pipeline is refused before it is queued; the first broken rule raises
        InvalidPipelineError."""
        validate_pipeline(pipeline, self.executors.keys(), check_retention=self.check_retention)
        validate_step_policies(pipeline, self.retry.validate)
        check_step_configs(pipeline.steps, self.executors)

    async def reassign_execution(
        self, execution_id: str, snapshot: ExecutionContextSnapshot | None, attributes: dict[str, str]
    ) -> ReassignOutcome:
        """Give a Running execution the run attributes of the attempt that continues it.

        Emits `execution.reassigned` (with the replaced values) when something changed, so the
        ledger re-reads the run identity: events from now on name the new attempt.
        """
        result = await self.store.reassign_execution(execution_id, attributes)
        if result.outcome is ReassignOutcome.REASSIGNED:
            await self._emit("execution.reassigned", execution_id, snapshot, previous=result.previous)
        return result.outcome

    def check_input(self, state: Any) -> None:
        """A run input must be a strict-JSON object of at most `settings.max_input_bytes`."""
        if not isinstance(state, dict):
            raise InvalidPipelineError(
                "input_json", f"Run input must be a JSON object, not {type(state).__name__}."
            )
        check_size(len(dumps_strict(state, "Run input")), self.settings.max_input_bytes, "Run input")

    async def run(self, execution_id: str, *, workers: int, watched: bool = False) -> str:
        """Advance the execution with `workers` concurrent workers until it stops.

        Returns the terminal status (Completed, Failed, Cancelled) or, when execution control
        parked it, the control status (Paused, WaitingForInput): nothing advances until
        someone resumes it or submits input, so call `run` again after that. Returns
        SUPERSEDED_STATUS when another local run took the execution over from `owner`, and ""
        when the execution's hot state vanished.

        `watched`: the caller wakes on the execution's unparking events from before this call
        on (an instance's doorbell), so a park returns at once; otherwise the control state
        is read again once the workers stopped, in case it was unparked meanwhile.
        """
        run = await self._until_available(lambda: self._load(execution_id), "engine.load", execution_id)
        # No more workers than steps: a worker with nothing to claim still costs a claim call.
        limit = min(workers, parallelism_limit(run.meta.pipeline.config) or workers, len(run.steps))
        count = max(1, limit)
        while True:
            async with asyncio.TaskGroup() as group:
                for n in range(count):
                    group.create_task(self._work(run, f"{self.instance_id}/w{n}"))
            if run.final_status is not None or run.parked_status is None:
                if run.final_status:
                    return run.final_status
                status = await self._until_available(
                    lambda: self.store.execution_status(execution_id), "engine.status", execution_id
                )
                return status or ""
            if watched:
                return run.parked_status
            control = await self._until_available(
                lambda: self.store.control_status(execution_id), "engine.control_status", execution_id
            )
            if control in PARKED_CONTROL_STATUSES:
                return control
            # Resumed (or input arrived) while the workers were stopping: advance again.
            run.parked_status, run.stopped = None, False

    async def _load(self, execution_id: str) -> ExecutionRun:
        created, self._created = self._created, None
        fresh = created is not None and created.execution_id == execution_id
        meta = created if fresh else await self.store.load_meta(execution_id)
        if meta is None:
            raise NotFoundError(f"Execution '{execution_id}' not found.", hint="Check the ExecutionId.")
        gates = StepGates.resolve(meta.pipeline, execution_id, self.instance_id, self.gate.scope_key)
        steps = {step.name: step for step in meta.pipeline.steps}
        return ExecutionRun(meta, steps, gates, ClaimSizer(self.settings.claim_batch_size))

    async def _until_available(
        self, operation: Callable[[], Awaitable[_T]], what: str, execution_id: str, **context: Any
    ) -> _T:
        """Retry one idempotent store call while Redis is unavailable (capped backoff, logged)."""
        return await retry_while_unavailable(
            operation, what, self.settings.store_retry, logger=log, execution_id=execution_id, **context
        )

    async def _work(self, run: ExecutionRun, worker_id: str) -> None:
        """One worker: advance until the execution stops, backing off while Redis is down."""
        token_prefix = secrets.token_hex(8)
        pace: WorkerPace | None = WorkerPace(self.settings.idle_poll_min_ms)
        outage = StoreOutage(
            "engine.worker",
            self.settings.store_retry,
            logger=log,
            execution_id=run.execution_id,
            worker_id=worker_id,
        )
        while pace is not None and run.advancing:
            try:
                pace = await self._work_once(run, worker_id, token_prefix, pace)
            except StoreUnavailableError as exc:
                await outage.wait(exc)
                continue
            outage.recovered()

    async def _work_once(
        self, run: ExecutionRun, worker_id: str, token_prefix: str, pace: WorkerPace
    ) -> WorkerPace | None:
        """One claim-execute or idle round; how to pace the next one, or None when this worker is done."""
        async with self._permit() as permit:
            if run.gates.active:
                idle = await self._advance_gated(run, worker_id, token_prefix)
            else:
                idle = await self._advance_batch(run, worker_id, token_prefix, permit)
        if idle is None:
            return WorkerPace(self.settings.idle_poll_min_ms)
        if not run.advancing:
            return None
        # Woken by a local completion that left nothing claimable: that worker finalizes what
        # it converged, so skip the finalize / stale-claim checks (2 round trips per idle worker
        # per step on a chain). A timed-out wait still makes them: other processes' work.
        if not pace.woken_locally:
            if await self._try_finalize(run):
                return None
            if await self.store.recover_stale(run.execution_id):
                await self._emit("step.recovered", run.execution_id, run.snapshot, worker_id=worker_id)
                return WorkerPace(pace.idle_ms)
        wait_ms = self.settings.idle_wait_while_executing_ms if run.holding else pace.idle_ms
        if idle.wake_at_ms is not None:
            wait_ms = max(1, min(wait_ms, idle.wake_at_ms - idle.now_ms))
        # Woken by a local change, or timed out (the timeout covers other processes' work).
        woken = await run.idle.wait(wait_ms / 1000)
        return WorkerPace(min(self.settings.idle_poll_max_ms, pace.idle_ms * 2), woken_locally=woken)

    def _permit(self) -> AbstractAsyncContextManager[Permit | None]:
        """A worker permit for one round of claiming and running steps (none to wait for
        outside a runtime instance); idle waits happen without one."""
        if self.worker_permits is None:
            return contextlib.nullcontext()
        return self.worker_permits.held()

    async def _advance_batch(
        self, run: ExecutionRun, worker_id: str, token_prefix: str, permit: Permit | None = None
    ) -> Idle | None:
        """Fast path (no gated step): each round trip reports the steps this worker executed
        and claims its next batch (`advance_steps`), until nothing is claimable or another
        execution's worker waits for this one's permit (then it only reports)."""
        done: list[Completion] = []
        holding = False
        try:
            while True:
                # Another worker waits for this one's permit and it has held it for a time
                # slice: report only and end the round, so one execution's long streak of
                # steps cannot starve the other runs of the process.
                handing_off = bool(done) and permit is not None and permit.should_hand_off()
                claim_count = run.sizer.size() if run.advancing and not handing_off else 0
                advanced = await self._advance(run, done, claim_count, token_prefix)
                await self._report(run, done, advanced, worker_id)
                done = []
                batch = advanced.claims
                if claim_count == 0 or not batch.claims:
                    return await self._nothing_claimed(run, batch, worker_id) if claim_count else None
                if not holding:
                    holding, run.holding = True, run.holding + 1
                await self._settle_resuming(run, batch, worker_id)
                done = await self._execute_batch(run, batch.claims, worker_id, token_prefix)
                if not done and not run.advancing:
                    return None
        finally:
            if holding:
                run.holding -= 1

    async def _execute_batch(
        self, run: ExecutionRun, claims: list[StepClaim], worker_id: str, token_prefix: str
    ) -> list[Completion]:
        """Run a claimed batch in order; the completions still to report.

        A batch is sized for fast steps, so when one is still running after
        `HAND_BACK_AFTER_S` (a model call, a step waiting on something), the steps of the batch
        that finished are reported at once and the ones not started are handed back (Ready, no
        retry used) for idle workers to run meanwhile, instead of waiting behind it."""
        if len(claims) == 1:
            completion = await self._execute(run, claims[0], worker_id)
            return [completion] if completion is not None else []
        batch = _BatchProgress(claims)
        loop = asyncio.get_running_loop()

        def check() -> None:
            """One timer per batch: spill once the current step has run for the whole delay."""
            waited = loop.time() - batch.step_started
            if waited < HAND_BACK_AFTER_S:
                batch.timer = loop.call_later(HAND_BACK_AFTER_S - waited, check)
            elif batch.done or batch.not_started:
                finished, not_started = batch.take_for_spill()
                batch.spill = asyncio.ensure_future(
                    self._spill(run, finished, not_started, worker_id, token_prefix)
                )

        batch.timer = loop.call_later(HAND_BACK_AFTER_S, check)
        try:
            for claim in claims:
                if batch.spill is not None:
                    break
                batch.step_started = loop.time()
                completion = await self._execute(run, claim, worker_id)
                batch.finished_step(completion)
        except BaseException:
            if batch.spill is not None:
                batch.spill.cancel()
            raise
        finally:
            batch.timer.cancel()
        if batch.spill is not None:
            await batch.spill
        return batch.done

    async def _spill(
        self,
        run: ExecutionRun,
        finished: list[Completion],
        not_started: list[StepClaim],
        worker_id: str,
        token_prefix: str,
    ) -> None:
        """Report the batch's finished steps now and hand its not-started ones back."""
        if finished:
            advanced = await self._advance(run, finished, 0, token_prefix)
            await self._report(run, finished, advanced, worker_id)
        for claim in not_started:
            await self._release_step(run, claim)
            await self._emit(
                "step.handed_back",
                run.execution_id,
                run.snapshot,
                step=claim.step_name,
                worker_id=worker_id,
                reason="claimed in a batch behind a long-running step",
            )
        if not_started:
            run.idle.wake(len(not_started))

    async def _nothing_claimed(self, run: ExecutionRun, batch: ClaimBatch, worker_id: str) -> Idle | None:
        """Why a claim came back empty: the execution ended, control blocks claims, or nothing
        is claimable before `next_eligible_ms`."""
        if batch.outcome in (ClaimOutcome.EXECUTION_MISSING, ClaimOutcome.EXECUTION_TERMINAL):
            run.stop(final_status=batch.detail or None)
            return None
        if batch.outcome is ClaimOutcome.SUPERSEDED:
            run.stop(final_status=SUPERSEDED_STATUS)
            return None
        if batch.outcome is ClaimOutcome.CONTROL_BLOCKED:
            await self._on_blocked(run, batch.detail, worker_id)
            return Idle(batch.now_ms)
        return Idle(batch.now_ms, batch.next_eligible_ms)

    async def _advance(
        self, run: ExecutionRun, done: list[Completion], claim_count: int, token_prefix: str
    ) -> AdvanceResult:
        """One `advance_steps` call. Steps that ran are reported with the same tokens until
        Redis answers (accepted at most once); a bare claim fails over to the worker loop."""
        started = time.perf_counter()

        def call() -> Awaitable[AdvanceResult]:
            return self.store.advance(
                run.execution_id,
                [(completion.claim, completion.stored) for completion in done],
                max_claim=claim_count,
                lease_ms=self.settings.lease_ms,
                token_prefix=token_prefix,
                owner=self.owner,
            )

        if done:
            advanced = await self._until_available(call, "step.advance", run.execution_id, steps=len(done))
        else:
            advanced = await call()
        run.sizer.record_call((time.perf_counter() - started) * 1000)
        return advanced

    async def _report(
        self, run: ExecutionRun, done: list[Completion], advanced: AdvanceResult, worker_id: str
    ) -> None:
        """Emit each completion's event, wake idle workers for what became claimable, and
        finalize once the execution converged with nothing left to run."""
        released = 0
        for completion, result in zip(done, advanced.completed, strict=True):
            released += result.released
            await self._after_transition(
                run,
                completion.claim,
                result.outcome,
                False,
                "step.completed",
                worker_id,
                wake=0,
                **completion.attributes,
            )
        others = released - len(advanced.claims.claims)
        if others > 0:
            run.idle.wake(others)
        if advanced.converged:
            await self._try_finalize(run)

    async def _advance_gated(self, run: ExecutionRun, worker_id: str, token_prefix: str) -> Idle | None:
        """Gated path: control gate -> policy admission -> lease -> DAG claim, one step at a time."""
        view = await self.store.ready_steps(run.execution_id)
        if view.execution_status != "Running":
            run.stop(final_status=view.execution_status)
            return None
        if view.control_status in BLOCKING_CONTROL_STATUSES:
            await self._on_blocked(run, view.control_status, worker_id)
            return Idle(view.now_ms)
        for step_name in view.eligible_now():
            if not run.gates.open_for(step_name, view.now_ms):
                continue  # a denial on a shared scope may have just held it back
            run.gates.attempting.add(step_name)
            try:
                attempted = await self._claim_gated(run, step_name, view.now_ms, worker_id, token_prefix)
            finally:
                run.gates.attempting.discard(step_name)
            if attempted:
                return None
        wake_at = [
            t for t in (view.next_eligible_ms(), run.gates.next_retry_ms(view.now_ms)) if t is not None
        ]
        return Idle(view.now_ms, min(wake_at, default=None))

    async def _claim_gated(
        self, run: ExecutionRun, step_name: str, now_ms: int, worker_id: str, token_prefix: str
    ) -> bool:
        """Try one step; True when it ran or the execution state moved on (re-read it)."""
        grant = await self._acquire_lease(run, step_name, now_ms, worker_id, token_prefix)
        if grant is None:
            return False
        batch = await self.store.claim_step(
            run.execution_id,
            step_name,
            lease_ms=self.settings.lease_ms,
            worker_id=worker_id,
            token_prefix=token_prefix,
            owner=self.owner,
        )
        if batch.outcome is ClaimOutcome.SUPERSEDED:
            run.stop(final_status=SUPERSEDED_STATUS)
        if batch.outcome is not ClaimOutcome.CLAIMED:
            await self._release_lease(run, grant)
            if grant.scope_keys:
                await self._emit(
                    "step.lease_released",
                    run.execution_id,
                    run.snapshot,
                    step=step_name,
                    worker_id=worker_id,
                    reason=f"claim not won: {batch.outcome.name}",
                )
            return batch.outcome in (
                ClaimOutcome.CONTROL_BLOCKED,
                ClaimOutcome.EXECUTION_TERMINAL,
                ClaimOutcome.EXECUTION_MISSING,
                ClaimOutcome.SUPERSEDED,
            )
        await self._settle_resuming(run, batch, worker_id)
        run.holding += 1
        try:
            completion = await self._execute(run, batch.claims[0], worker_id)
            if completion is not None:
                advanced = await self._advance(run, [completion], 0, token_prefix)
                await self._report(run, [completion], advanced, worker_id)
        finally:
            run.holding -= 1
            await self._release_lease(run, grant)
        return True

    async def _acquire_lease(
        self, run: ExecutionRun, step_name: str, now_ms: int, worker_id: str, token_prefix: str
    ) -> LeaseGrant | None:
        """A grant (holding no scope when the step is not gated), or None when refused."""
        lease_id = f"{run.execution_id}:{step_name}:{token_prefix}:{secrets.token_hex(4)}"
        effective = run.gates.effective.get(step_name)
        if effective is None:
            return LeaseGrant(lease_id=lease_id)
        decision = await self.gate.try_acquire(effective, lease_id)
        if isinstance(decision, LeaseGrant):
            return decision
        if isinstance(decision, AdmissionDenial):
            run.gates.deny_step(step_name, now_ms + decision.retry_after_ms)
            event, detail = "step.admission_denied", {"policy": decision.policy}
        else:
            assert isinstance(decision, LeaseDenial)
            run.gates.deny_scope(decision.scope_key, now_ms + decision.retry_after_ms)
            event = "step.lease_denied"
            detail = {"scope_key": decision.scope_key, "current": decision.current, "limit": decision.limit}
        await self._emit(
            event,
            run.execution_id,
            run.snapshot,
            step=step_name,
            worker_id=worker_id,
            reason=decision.reason,
            retry_after_ms=decision.retry_after_ms,
            **detail,
        )
        return None

    async def _release_lease(self, run: ExecutionRun, grant: LeaseGrant) -> None:
        if not grant.scope_keys:
            return
        await self.gate.release(grant)
        run.gates.lift_scopes(grant.scope_keys)
        run.idle.wake()

    async def _on_blocked(self, run: ExecutionRun, control_status: str, worker_id: str) -> None:
        """Claims are blocked: stop when parked, settle Pausing -> Paused once drained."""
        if control_status in PARKED_CONTROL_STATUSES:
            run.stop(parked_status=control_status)
            return
        if control_status != "Pausing" or self.settle_control is None:
            return  # Cancelling: the caller's finalize attempt applies it once drained
        if await self.settle_control(run.execution_id, control_status) == "Paused":
            await self._emit("execution.paused", run.execution_id, run.snapshot, worker_id=worker_id)
            run.stop(parked_status="Paused")

    async def _settle_resuming(self, run: ExecutionRun, batch: ClaimBatch, worker_id: str) -> None:
        """Work advanced while control said Resuming: it is Running again."""
        if batch.control_status != "Resuming" or self.settle_control is None or run.settling:
            return
        run.settling = True
        try:
            if await self.settle_control(run.execution_id, "Resuming") == "Running":
                await self._emit("execution.resumed", run.execution_id, run.snapshot, worker_id=worker_id)
        finally:
            run.settling = False

    async def _try_finalize(self, run: ExecutionRun) -> bool:
        outcome, status = await self.store.finalize(run.execution_id)
        if outcome is FinalizeOutcome.NOT_CONVERGED:
            return False
        run.stop(final_status=status)
        if outcome is FinalizeOutcome.FINALIZED:
            await self._emit("execution.finalized", run.execution_id, run.snapshot, status=status)
        return True

    async def _execute(self, run: ExecutionRun, claim: StepClaim, worker_id: str) -> Completion | None:
        """Run one claimed step; its completion to report, or None when it failed or parked
        (those transitions are made at once)."""
        started = time.perf_counter()
        try:
            return await self._execute_claimed(run, claim, worker_id)
        finally:
            run.sizer.record_step((time.perf_counter() - started) * 1000)

    async def _execute_claimed(
        self, run: ExecutionRun, claim: StepClaim, worker_id: str
    ) -> Completion | None:
        step = run.steps[claim.step_name]
        await self._emit(
            "step.claimed",
            run.execution_id,
            run.snapshot,
            step=step.name,
            worker_id=worker_id,
            retry_count=claim.retry_count,
            step_key=step.step_key,
        )
        tracing = self.step_tracing.step_span(run.meta, step, claim.retry_count, worker_id)
        try:
            with restored_snapshot(run.snapshot), tracing:
                async with self.invoker.lease_kept(claim):
                    result = await self.invoker.invoke(run, step, claim)
            self.invoker.check_result(step, result)
        except StepParked as parked:
            await self._park(run, step, claim, parked, worker_id)
            return None
        except StepFailure as failure:
            await self._fail(run, step, claim, failure, worker_id)
            return None
        stored = await self._until_available(
            lambda: self.results.encode(run.execution_id, step.name, result, run.snapshot),
            "step.encode",
            run.execution_id,
            step=step.name,
        )
        return Completion(claim, stored, usage_attributes(result_usage(result)))

    async def _fail(
        self, run: ExecutionRun, step: StepDefinition, claim: StepClaim, failure: StepFailure, worker_id: str
    ) -> None:
        seed = f"{run.execution_id}:{step.name}:{claim.retry_count}"
        decision = self.retry.decide(
            step.config, failure.code, claim.retry_count, seed, retry_after_ms=failure.retry_after_ms
        )
        error = {"code": failure.code, "message": failure.message, "reason": decision.reason}
        result = await self._until_available(
            lambda: self.store.fail_step(
                claim, retry=decision.retry, delay_ms=decision.delay_ms, error=error
            ),
            "step.fail",
            run.execution_id,
            step=step.name,
        )
        event = "step.retry_scheduled" if decision.retry else "step.failed"
        await self._after_transition(
            run,
            claim,
            result.outcome,
            result.converged,
            event,
            worker_id,
            code=failure.code,
            error=failure.message,
            retry_count=result.retry_count,
            retries_exhausted=decision.exhausted,
            next_retry_at_ms=result.next_retry_at_ms,
            **usage_attributes(failure.usage),
        )

    async def _park(
        self, run: ExecutionRun, step: StepDefinition, claim: StepClaim, parked: StepParked, worker_id: str
    ) -> None:
        """Mark the execution WaitingForInput first, then hand the step back (Ready, no retry used)."""
        if self.on_park is None:
            failure = StepFailure(
                f"Step '{step.name}' waits for input under key '{parked.waiting_key}', but no execution "
                "control is attached to this engine to receive it.",
                code="permanent",
            )
            await self._fail(run, step, claim, failure, worker_id)
            return
        on_park = self.on_park
        try:
            await self._until_available(
                lambda: on_park(claim, parked, run.snapshot), "step.park", run.execution_id, step=step.name
            )
        except ConflictError as refused:  # paused/cancelled meanwhile: it parks again after resume
            await self._emit(
                "step.park_refused", run.execution_id, run.snapshot, step=step.name, reason=refused.message
            )
        await self._release_step(run, claim)
        run.idle.wake()
        await self._emit(
            "step.parked",
            run.execution_id,
            run.snapshot,
            step=claim.step_name,
            worker_id=worker_id,
            waiting_key=parked.waiting_key,
            prompt=parked.prompt,
        )

    async def _release_step(self, run: ExecutionRun, claim: StepClaim) -> None:
        """Hand a claimed step back: Ready again, no retry used (a parked or handed-back step)."""
        await self._until_available(
            lambda: self.store.release_step(claim), "step.release", run.execution_id, step=claim.step_name
        )

    async def _after_transition(
        self,
        run: ExecutionRun,
        claim: StepClaim,
        outcome: TransitionOutcome,
        converged: bool,
        event: str,
        worker_id: str,
        *,
        wake: int | None = None,
        **attributes: Any,
    ) -> None:
        """Emit the event, wake `wake` idle workers (None: all), finalize once converged."""
        if outcome is not TransitionOutcome.APPLIED:
            await self._emit(
                "step.transition_rejected",
                run.execution_id,
                run.snapshot,
                step=claim.step_name,
                worker_id=worker_id,
                outcome=outcome.name,
                attempted=event,
            )
            return
        await self._emit(
            event, run.execution_id, run.snapshot, step=claim.step_name, worker_id=worker_id, **attributes
        )
        run.idle.wake(wake)
        if converged:
            await self._try_finalize(run)

    async def _emit(
        self,
        name: str,
        execution_id: str,
        snapshot: ExecutionContextSnapshot | None,
        *,
        step: str | None = None,
        worker_id: str | None = None,
        **attributes: Any,
    ) -> None:
        await self.observer.on_event(
            EngineEvent(name, execution_id, snapshot, step, worker_id, attributes=attributes)
        )


class _BatchProgress:
    """How far a worker got through a claimed batch, for `_execute_batch`'s spill timer."""

    def __init__(self, claims: list[StepClaim]) -> None:
        self.claims = claims
        self.ran = 0  # claims run to their end so far; the one at this index is running
        self.done: list[Completion] = []
        self.step_started = 0.0
        self.timer: asyncio.TimerHandle
        self.spill: asyncio.Future[None] | None = None

    @property
    def not_started(self) -> list[StepClaim]:
        return self.claims[self.ran + 1 :]

    def finished_step(self, completion: Completion | None) -> None:
        self.ran += 1
        if completion is not None:
            self.done.append(completion)

    def take_for_spill(self) -> tuple[list[Completion], list[StepClaim]]:
        """The finished completions (no longer this batch's to report) and the claims not
        started (no longer this batch's to run)."""
        finished, self.done = self.done, []
        return finished, self.not_started
