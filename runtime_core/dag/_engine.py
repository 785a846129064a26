"""DagEngine: N stateless workers advancing one execution only through the DagStore.

Owns the worker loop: the control gate (blocked claims, Pausing -> Paused, Resuming ->
Running, prompt cancellation), the claim path (batch claims when no step is concurrency
gated; otherwise admission -> lease -> single claim per step), step invocation, parking for
human input, convergence and finalization, and riding out a Redis outage: a worker backs
off and retries while the store is unavailable, and a step's completion, failure or
release is retried with the same claim token (accepted at most once) instead of being
dropped. Also owns `validate`, the one full pipeline check: create time, shared-run submit
and the `pipelines.validate` tool all call it. Must not write state a Lua script guards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from runtime_core.concurrency import (
    AdmissionDenial,
    ConcurrencyGate,
    LeaseDenial,
    LeaseGrant,
    parallelism_limit,
)
from runtime_core.dag._batching import ClaimSizer
from runtime_core.dag._events import EngineEvent, ExecutionObserver, NullObserver
from runtime_core.dag._gating import StepGates, validate_step_policies
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
from runtime_core.errors import (
    ConflictError,
    InvalidPipelineError,
    NotFoundError,
    RuntimeCoreError,
    StoreUnavailableError,
)
from runtime_core.hot_state import DEFAULT_STORE_RETRY, StoreOutage, StoreRetryPolicy, retry_while_unavailable
from runtime_core.identity import ExecutionContextSnapshot, new_execution_id, restored_snapshot
from runtime_core.pipeline import (
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_MAX_RESULT_BYTES,
    BindingError,
    PipelineDefinition,
    RetentionCheck,
    StepDefinition,
    check_size,
    dumps_strict,
    resolve_inputs,
    validate_pipeline,
)
from runtime_core.steps import (
    ExecutorRegistry,
    StepExecutor,
    StepFailure,
    StepInvocation,
    StepParked,
    check_step_configs,
    result_usage,
    usage_attributes,
)

log = logging.getLogger("runtime_core.dag")

_T = TypeVar("_T")


# Control statuses at which `run` returns instead of waiting: someone must act first.
PARKED_CONTROL_STATUSES = ("Paused", "WaitingForInput")


class RetryDecider(Protocol):
    def validate(self, step_config: dict[str, Any]) -> Any: ...

    def decide(self, config: dict[str, Any], failure_code: str, retry_count: int, seed: str) -> Any: ...


class ResultCodec(Protocol):
    """How results travel between executors and Redis (payload externalization hooks in here)."""

    async def encode(
        self, execution_id: str, step_name: str, result: Any, snapshot: ExecutionContextSnapshot | None
    ) -> Any: ...

    async def decode(
        self, execution_id: str, stored: dict[str, Any], snapshot: ExecutionContextSnapshot | None
    ) -> dict[str, Any]: ...


class InlineResults:
    """Default codec: results are stored in Redis as they are."""

    async def encode(
        self, execution_id: str, step_name: str, result: Any, snapshot: ExecutionContextSnapshot | None
    ) -> Any:
        return result

    async def decode(
        self, execution_id: str, stored: dict[str, Any], snapshot: ExecutionContextSnapshot | None
    ) -> dict[str, Any]:
        return stored


@dataclass(frozen=True)
class EngineSettings:
    lease_ms: int = 60_000
    # Most steps one worker claims (and later reports) per round trip; the claim size adapts
    # to how fast steps execute (`ClaimSizer`). 1 claims and completes one step per call.
    claim_batch_size: int = 32
    idle_poll_min_ms: int = 2
    idle_poll_max_ms: int = 100
    # While another worker of this process executes a step of the execution, an idle worker
    # is woken by that worker's completion; it only re-checks Redis this rarely.
    idle_wait_while_executing_ms: int = 1_000
    store_retry: StoreRetryPolicy = DEFAULT_STORE_RETRY
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES


class _IdleWorkers:
    """This process's idle workers of one execution, woken by its local changes.

    `wake(n)` wakes at most n of them (a completion that made one step Ready needs no
    other worker: the completing worker claims it next), `wake()` wakes all. A wake that
    finds nobody waiting is not kept; the waiters' poll timeout covers that race.
    """

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()

    def wake(self, count: int | None = None) -> None:
        woken = 0
        while self._waiting and (count is None or woken < count):
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                woken += 1

    async def wait(self, timeout_s: float) -> bool:
        """True when woken, False when `timeout_s` passed."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout=timeout_s)
        except TimeoutError:
            return False
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
        return True


@dataclass
class _ExecutionRun:
    """What one process caches about an execution it advances, plus its workers' shared state."""

    meta: ExecutionMeta
    steps: dict[str, StepDefinition]
    gates: StepGates
    sizer: ClaimSizer
    idle: _IdleWorkers = field(default_factory=_IdleWorkers)
    holding: int = 0  # this process's workers holding claims (executing or reporting them)
    final_status: str | None = None
    parked_status: str | None = None
    stopped: bool = False
    settling: bool = False

    @property
    def execution_id(self) -> str:
        return self.meta.execution_id

    @property
    def snapshot(self) -> ExecutionContextSnapshot | None:
        return self.meta.snapshot

    @property
    def advancing(self) -> bool:
        return not self.stopped and self.final_status is None and self.parked_status is None

    def stop(self, *, final_status: str | None = None, parked_status: str | None = None) -> None:
        self.final_status = final_status or self.final_status
        self.parked_status = parked_status or self.parked_status
        self.stopped = True
        self.idle.wake()


@dataclass(frozen=True)
class _WorkerPace:
    """How a worker paces its next idle round: the poll delay, and whether its last wait
    ended because a local completion woke it (rather than by timing out)."""

    idle_ms: int
    woken_locally: bool = False


@dataclass(frozen=True)
class _Idle:
    """Nothing was claimable: the server time and when something may become claimable."""

    now_ms: int
    wake_at_ms: int | None = None


@dataclass(frozen=True)
class Completion:
    """A step that ran, reported with the worker's next claim: the result to store and the
    extra attributes of its `step.completed` event (token usage)."""

    claim: StepClaim
    stored: Any
    attributes: dict[str, Any]


ParkHandler = Callable[[StepClaim, StepParked, ExecutionContextSnapshot | None], Awaitable[None]]
InputReader = Callable[[str, str], Awaitable[dict[str, Any] | None]]
# (execution id, observed control status) -> the status it settled into, or None.
ControlSettler = Callable[[str, str], Awaitable[str | None]]


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
        self.results: ResultCodec = results or InlineResults()
        self.instance_id = instance_id
        self.gate = ConcurrencyGate(store.hot_state)
        # Execution-control hooks; `runtime_core.control.attach_execution_control` sets them.
        self.on_park: ParkHandler | None = None
        self.read_human_input: InputReader | None = None
        self.settle_control: ControlSettler | None = None
        # The retention engine's `validate`; `runtime_core.bootstrap` sets it with the audit wiring.
        self.check_retention: RetentionCheck | None = None
        # Spans around step invocations; `runtime_core.bootstrap` sets it when tracing is on.
        self.step_tracing: StepTracing = NoStepTracing()

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
        if created:
            await self._emit("execution.created", execution_id, snapshot, pipeline=pipeline.key)
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

    async def run(self, execution_id: str, *, workers: int) -> str:
        """Advance the execution with `workers` concurrent workers until it stops.

        Returns the terminal status (Completed, Failed, Cancelled) or, when execution control
        parked it, the control status (Paused, WaitingForInput): nothing advances until
        someone resumes it or submits input, so call `run` again after that.
        """
        run = await self._until_available(lambda: self._load(execution_id), "engine.load", execution_id)
        count = max(1, min(workers, parallelism_limit(run.meta.pipeline.config) or workers))
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
            control = await self._until_available(
                lambda: self.store.control_status(execution_id), "engine.control_status", execution_id
            )
            if control in PARKED_CONTROL_STATUSES:
                return control
            # Resumed (or input arrived) while the workers were stopping: advance again.
            run.parked_status, run.stopped = None, False

    async def _load(self, execution_id: str) -> _ExecutionRun:
        meta = await self.store.load_meta(execution_id)
        if meta is None:
            raise NotFoundError(f"Execution '{execution_id}' not found.", hint="Check the ExecutionId.")
        gates = StepGates.resolve(meta.pipeline, execution_id, self.instance_id, self.gate.scope_key)
        steps = {step.name: step for step in meta.pipeline.steps}
        return _ExecutionRun(meta, steps, gates, ClaimSizer(self.settings.claim_batch_size))

    async def _until_available(
        self, operation: Callable[[], Awaitable[_T]], what: str, execution_id: str, **context: Any
    ) -> _T:
        """Retry one idempotent store call while Redis is unavailable (capped backoff, logged)."""
        return await retry_while_unavailable(
            operation, what, self.settings.store_retry, logger=log, execution_id=execution_id, **context
        )

    async def _work(self, run: _ExecutionRun, worker_id: str) -> None:
        """One worker: advance until the execution stops, backing off while Redis is down."""
        token_prefix = secrets.token_hex(8)
        pace: _WorkerPace | None = _WorkerPace(self.settings.idle_poll_min_ms)
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
        self, run: _ExecutionRun, worker_id: str, token_prefix: str, pace: _WorkerPace
    ) -> _WorkerPace | None:
        """One claim-execute or idle round; how to pace the next one, or None when this worker is done."""
        if run.gates.active:
            idle = await self._advance_gated(run, worker_id, token_prefix)
        else:
            idle = await self._advance_batch(run, worker_id, token_prefix)
        if idle is None:
            return _WorkerPace(self.settings.idle_poll_min_ms)
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
                return _WorkerPace(pace.idle_ms)
        wait_ms = self.settings.idle_wait_while_executing_ms if run.holding else pace.idle_ms
        if idle.wake_at_ms is not None:
            wait_ms = max(1, min(wait_ms, idle.wake_at_ms - idle.now_ms))
        # Woken by a local change, or timed out (the timeout covers other processes' work).
        woken = await run.idle.wait(wait_ms / 1000)
        return _WorkerPace(min(self.settings.idle_poll_max_ms, pace.idle_ms * 2), woken_locally=woken)

    async def _advance_batch(self, run: _ExecutionRun, worker_id: str, token_prefix: str) -> _Idle | None:
        """Fast path (no gated step): each round trip reports the steps this worker executed
        and claims its next batch (`advance_steps`), until nothing is claimable."""
        done: list[Completion] = []
        holding = False
        try:
            while True:
                claim_count = run.sizer.size() if run.advancing else 0
                advanced = await self._advance(run, done, claim_count, token_prefix)
                await self._report(run, done, advanced, worker_id)
                done = []
                batch = advanced.claims
                if claim_count == 0 or not batch.claims:
                    return await self._nothing_claimed(run, batch, worker_id) if claim_count else None
                if not holding:
                    holding, run.holding = True, run.holding + 1
                await self._settle_resuming(run, batch, worker_id)
                for claim in batch.claims:
                    completion = await self._execute(run, claim, worker_id)
                    if completion is not None:
                        done.append(completion)
                if not done and not run.advancing:
                    return None
        finally:
            if holding:
                run.holding -= 1

    async def _nothing_claimed(self, run: _ExecutionRun, batch: ClaimBatch, worker_id: str) -> _Idle | None:
        """Why a claim came back empty: the execution ended, control blocks claims, or nothing
        is claimable before `next_eligible_ms`."""
        if batch.outcome in (ClaimOutcome.EXECUTION_MISSING, ClaimOutcome.EXECUTION_TERMINAL):
            run.stop(final_status=batch.detail or None)
            return None
        if batch.outcome is ClaimOutcome.CONTROL_BLOCKED:
            await self._on_blocked(run, batch.detail, worker_id)
            return _Idle(batch.now_ms)
        return _Idle(batch.now_ms, batch.next_eligible_ms)

    async def _advance(
        self, run: _ExecutionRun, done: list[Completion], claim_count: int, token_prefix: str
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
            )

        if done:
            advanced = await self._until_available(call, "step.advance", run.execution_id, steps=len(done))
        else:
            advanced = await call()
        run.sizer.record_call((time.perf_counter() - started) * 1000)
        return advanced

    async def _report(
        self, run: _ExecutionRun, done: list[Completion], advanced: AdvanceResult, worker_id: str
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

    async def _advance_gated(self, run: _ExecutionRun, worker_id: str, token_prefix: str) -> _Idle | None:
        """Gated path: control gate -> policy admission -> lease -> DAG claim, one step at a time."""
        view = await self.store.ready_steps(run.execution_id)
        if view.execution_status != "Running":
            run.stop(final_status=view.execution_status)
            return None
        if view.control_status in BLOCKING_CONTROL_STATUSES:
            await self._on_blocked(run, view.control_status, worker_id)
            return _Idle(view.now_ms)
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
        return _Idle(view.now_ms, min(wake_at, default=None))

    async def _claim_gated(
        self, run: _ExecutionRun, step_name: str, now_ms: int, worker_id: str, token_prefix: str
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
        )
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
        self, run: _ExecutionRun, step_name: str, now_ms: int, worker_id: str, token_prefix: str
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

    async def _release_lease(self, run: _ExecutionRun, grant: LeaseGrant) -> None:
        if not grant.scope_keys:
            return
        await self.gate.release(grant)
        run.gates.lift_scopes(grant.scope_keys)
        run.idle.wake()

    async def _on_blocked(self, run: _ExecutionRun, control_status: str, worker_id: str) -> None:
        """Claims are blocked: stop when parked, settle Pausing -> Paused once drained."""
        if control_status in PARKED_CONTROL_STATUSES:
            run.stop(parked_status=control_status)
            return
        if control_status != "Pausing" or self.settle_control is None:
            return  # Cancelling: the caller's finalize attempt applies it once drained
        if await self.settle_control(run.execution_id, control_status) == "Paused":
            await self._emit("execution.paused", run.execution_id, run.snapshot, worker_id=worker_id)
            run.stop(parked_status="Paused")

    async def _settle_resuming(self, run: _ExecutionRun, batch: ClaimBatch, worker_id: str) -> None:
        """Work advanced while control said Resuming: it is Running again."""
        if batch.control_status != "Resuming" or self.settle_control is None or run.settling:
            return
        run.settling = True
        try:
            if await self.settle_control(run.execution_id, "Resuming") == "Running":
                await self._emit("execution.resumed", run.execution_id, run.snapshot, worker_id=worker_id)
        finally:
            run.settling = False

    async def _try_finalize(self, run: _ExecutionRun) -> bool:
        outcome, status = await self.store.finalize(run.execution_id)
        if outcome is FinalizeOutcome.NOT_CONVERGED:
            return False
        run.stop(final_status=status)
        if outcome is FinalizeOutcome.FINALIZED:
            await self._emit("execution.finalized", run.execution_id, run.snapshot, status=status)
        return True

    async def _execute(self, run: _ExecutionRun, claim: StepClaim, worker_id: str) -> Completion | None:
        """Run one claimed step; its completion to report, or None when it failed or parked
        (those transitions are made at once)."""
        started = time.perf_counter()
        try:
            return await self._execute_claimed(run, claim, worker_id)
        finally:
            run.sizer.record_step((time.perf_counter() - started) * 1000)

    async def _execute_claimed(
        self, run: _ExecutionRun, claim: StepClaim, worker_id: str
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
                async with self._lease_kept(claim):
                    result = await self._invoke(run, step, claim)
            self._check_result(step, result)
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

    @contextlib.asynccontextmanager
    async def _lease_kept(self, claim: StepClaim) -> AsyncIterator[None]:
        """Renew the step's lease every third of it while the executor runs."""
        keeper = asyncio.create_task(self._keep_lease(claim))
        try:
            yield
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def _keep_lease(self, claim: StepClaim) -> None:
        lease_ms = self.settings.lease_ms
        while True:
            await asyncio.sleep(lease_ms / 3000)  # a renewal timer, not synchronisation
            try:
                if not await self.store.renew_step_lease(claim, lease_ms=lease_ms):
                    return  # the claim was lost (recovered): the completion will be rejected
            except Exception as exc:  # Redis down or still loading: the step itself must not fail
                log.warning(
                    "step.lease_renewal_failed",
                    extra={"execution_id": claim.execution_id, "step": claim.step_name, "error": repr(exc)},
                )

    def _check_result(self, step: StepDefinition, result: Any) -> None:
        """A result that is not strict JSON or above `max_result_bytes` fails the step for good."""
        what = f"Result of step '{step.name}'"
        try:
            check_size(len(dumps_strict(result, what)), self.settings.max_result_bytes, what)
        except RuntimeCoreError as exc:
            raise StepFailure(f"[{exc.code}] {exc.message}", code="permanent") from exc

    async def _invoke(self, run: _ExecutionRun, step: StepDefinition, claim: StepClaim) -> Any:
        executor = self.executors.get(step.step_key)
        if executor is None:
            raise StepFailure(f"No executor registered for stepKey '{step.step_key}'.", code="permanent")
        try:
            upstream = await self.results.decode(run.execution_id, claim.dependency_results, run.snapshot)
            inputs = resolve_inputs(step, run.meta.state, upstream)
        except BindingError as exc:
            raise StepFailure(exc.message, code="resolver") from exc
        invocation = StepInvocation(
            execution_id=run.execution_id,
            pipeline_name=run.meta.pipeline.name,
            pipeline_version=run.meta.pipeline.version,
            step_name=step.name,
            step_key=step.step_key,
            config=step.config,
            inputs=inputs,
            state=run.meta.state,
            attempt=claim.retry_count,
            snapshot=run.snapshot,
        )
        try:
            return await self._call(run, executor, invocation)
        except StepParked:
            # Stored human input is read only for a step that asks for it: no extra round
            # trip on the common path. With input present the step runs again with it.
            human_input = await self._stored_input(run, step)
            if human_input is None:
                raise
            return await self._call(run, executor, invocation.model_copy(update={"human_input": human_input}))

    async def _stored_input(self, run: _ExecutionRun, step: StepDefinition) -> dict[str, Any] | None:
        if self.read_human_input is None:
            return None
        return await self.read_human_input(run.execution_id, step.name)

    async def _call(self, run: _ExecutionRun, executor: StepExecutor, invocation: StepInvocation) -> Any:
        timeout_ms = invocation.config.get("timeoutMs")
        try:
            if timeout_ms:
                return await asyncio.wait_for(executor.execute(invocation), timeout=float(timeout_ms) / 1000)
            return await executor.execute(invocation)
        except TimeoutError as exc:
            raise StepFailure(
                f"Step '{invocation.step_name}' exceeded timeoutMs={timeout_ms}.", code="timeout"
            ) from exc
        except (StepFailure, StepParked):
            raise
        except Exception as exc:  # an executor bug is a step failure, never a worker crash
            log.exception(
                "step.executor_error", extra={"execution_id": run.execution_id, "step": invocation.step_name}
            )
            raise StepFailure(f"{type(exc).__name__}: {exc}", code="exception") from exc

    async def _fail(
        self, run: _ExecutionRun, step: StepDefinition, claim: StepClaim, failure: StepFailure, worker_id: str
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
        self, run: _ExecutionRun, step: StepDefinition, claim: StepClaim, parked: StepParked, worker_id: str
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
        await self._until_available(
            lambda: self.store.release_step(claim), "step.release", run.execution_id, step=step.name
        )
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

    async def _after_transition(
        self,
        run: _ExecutionRun,
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
