"""DagEngine: N stateless workers advancing one execution only through the DagStore."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime_core.dag._events import EngineEvent, ExecutionObserver, NullObserver
from runtime_core.dag._store import (
    ClaimOutcome,
    DagStore,
    ExecutionMeta,
    FinalizeOutcome,
    StepClaim,
    TransitionOutcome,
)
from runtime_core.errors import NotFoundError
from runtime_core.identity import ExecutionContextSnapshot, new_execution_id, restored_snapshot
from runtime_core.pipeline import (
    BindingError,
    PipelineDefinition,
    StepDefinition,
    resolve_inputs,
    validate_pipeline,
)
from runtime_core.steps import ExecutorRegistry, StepFailure, StepInvocation, StepParked

log = logging.getLogger("runtime_core.dag")


class RetryDecider(Protocol):
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
    claim_batch_size: int = 1
    idle_poll_min_ms: int = 2
    idle_poll_max_ms: int = 100


@dataclass
class _ExecutionRun:
    """What one process caches about an execution it advances (immutable after creation)."""

    meta: ExecutionMeta
    steps: dict[str, StepDefinition]
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    final_status: str | None = None

    @property
    def execution_id(self) -> str:
        return self.meta.execution_id

    @property
    def snapshot(self) -> ExecutionContextSnapshot | None:
        return self.meta.snapshot


ParkHandler = Callable[[StepClaim, StepParked, ExecutionContextSnapshot | None], Awaitable[None]]
InputReader = Callable[[str, str], Awaitable[dict[str, Any] | None]]


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
        self.on_park: ParkHandler | None = None
        self.read_human_input: InputReader | None = None

    async def create_execution(
        self,
        pipeline: PipelineDefinition,
        state: dict[str, Any],
        snapshot: ExecutionContextSnapshot | None,
        *,
        execution_id: str | None = None,
        attributes: dict[str, str] | None = None,
    ) -> str:
        """Validate the pipeline and create its hot DAG state; returns the ExecutionId."""
        validate_pipeline(pipeline, self.executors.keys())
        execution_id = execution_id or new_execution_id()
        created = await self.store.create_execution(execution_id, pipeline, state, snapshot, attributes)
        if created:
            await self._emit("execution.created", execution_id, snapshot, pipeline=pipeline.key)
        return execution_id

    async def run(self, execution_id: str, *, workers: int) -> str:
        """Advance the execution with `workers` concurrent workers until it is terminal."""
        run = await self._load(execution_id)
        dop = run.meta.pipeline.config.get("concurrency", {}).get("maxDegreeOfParallelism")
        count = max(1, min(workers, int(dop))) if dop else max(1, workers)
        async with asyncio.TaskGroup() as group:
            for n in range(count):
                group.create_task(self._work(run, f"{self.instance_id}/w{n}"))
        return run.final_status or (await self.store.execution_status(execution_id) or "")

    async def _load(self, execution_id: str) -> _ExecutionRun:
        meta = await self.store.load_meta(execution_id)
        if meta is None:
            raise NotFoundError(f"Execution '{execution_id}' not found.", hint="Check the ExecutionId.")
        return _ExecutionRun(meta, {step.name: step for step in meta.pipeline.steps})

    async def _work(self, run: _ExecutionRun, worker_id: str) -> None:
        token_prefix = secrets.token_hex(8)
        idle_ms = self.settings.idle_poll_min_ms
        while run.final_status is None:
            batch = await self.store.claim_ready_steps(
                run.execution_id,
                max_steps=self.settings.claim_batch_size,
                lease_ms=self.settings.lease_ms,
                worker_id=worker_id,
                token_prefix=token_prefix,
            )
            if batch.outcome in (ClaimOutcome.EXECUTION_MISSING, ClaimOutcome.EXECUTION_TERMINAL):
                run.final_status = batch.detail or run.final_status
                run.wake.set()
                return
            if batch.claims:
                idle_ms = self.settings.idle_poll_min_ms
                for claim in batch.claims:
                    await self._execute(run, claim, worker_id)
                continue
            if await self._try_finalize(run):
                return
            if await self.store.recover_stale(run.execution_id):
                await self._emit("step.recovered", run.execution_id, run.snapshot, worker_id=worker_id)
                continue
            wait_ms = idle_ms
            if batch.next_eligible_ms:
                wait_ms = max(1, min(idle_ms, batch.next_eligible_ms - batch.now_ms))
            await self._wait(run, wait_ms)
            idle_ms = min(self.settings.idle_poll_max_ms, idle_ms * 2)

    @staticmethod
    async def _wait(run: _ExecutionRun, wait_ms: int) -> None:
        # A local completion wakes idle workers at once; the timeout covers other processes.
        run.wake.clear()
        try:
            await asyncio.wait_for(run.wake.wait(), timeout=wait_ms / 1000)
        except TimeoutError:
            pass

    async def _try_finalize(self, run: _ExecutionRun) -> bool:
        outcome, status = await self.store.finalize(run.execution_id)
        if outcome is FinalizeOutcome.NOT_CONVERGED:
            return False
        run.final_status = status
        run.wake.set()
        if outcome is FinalizeOutcome.FINALIZED:
            await self._emit("execution.finalized", run.execution_id, run.snapshot, status=status)
        return True

    async def _execute(self, run: _ExecutionRun, claim: StepClaim, worker_id: str) -> None:
        step = run.steps[claim.step_name]
        await self._emit(
            "step.claimed",
            run.execution_id,
            run.snapshot,
            step=step.name,
            worker_id=worker_id,
            retry_count=claim.retry_count,
        )
        try:
            with restored_snapshot(run.snapshot):
                result = await self._invoke(run, step, claim)
        except StepParked as parked:
            await self._park(run, claim, parked)
            return
        except StepFailure as failure:
            await self._fail(run, step, claim, failure, worker_id)
            return
        stored = await self.results.encode(run.execution_id, step.name, result, run.snapshot)
        outcome = await self.store.complete_step(claim, stored)
        await self._after_transition(
            run, claim, outcome.outcome, outcome.converged, "step.completed", worker_id
        )

    async def _invoke(self, run: _ExecutionRun, step: StepDefinition, claim: StepClaim) -> Any:
        executor = self.executors.get(step.step_key)
        if executor is None:
            raise StepFailure(f"No executor registered for stepKey '{step.step_key}'.", code="permanent")
        try:
            upstream = await self.results.decode(run.execution_id, claim.dependency_results, run.snapshot)
            inputs = resolve_inputs(step, run.meta.state, upstream)
        except BindingError as exc:
            raise StepFailure(exc.message, code="resolver") from exc
        human_input = None
        if self.read_human_input is not None:
            human_input = await self.read_human_input(run.execution_id, step.name)
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
            human_input=human_input,
        )
        timeout_ms = step.config.get("timeoutMs")
        try:
            if timeout_ms:
                return await asyncio.wait_for(executor.execute(invocation), timeout=float(timeout_ms) / 1000)
            return await executor.execute(invocation)
        except TimeoutError as exc:
            raise StepFailure(f"Step '{step.name}' exceeded timeoutMs={timeout_ms}.", code="timeout") from exc
        except (StepFailure, StepParked):
            raise
        except Exception as exc:  # an executor bug is a step failure, never a worker crash
            log.exception("step.executor_error", extra={"execution_id": run.execution_id, "step": step.name})
            raise StepFailure(f"{type(exc).__name__}: {exc}", code="exception") from exc

    async def _fail(
        self, run: _ExecutionRun, step: StepDefinition, claim: StepClaim, failure: StepFailure, worker_id: str
    ) -> None:
        seed = f"{run.execution_id}:{step.name}:{claim.retry_count}"
        decision = self.retry.decide(step.config, failure.code, claim.retry_count, seed)
        error = {"code": failure.code, "message": failure.message, "reason": decision.reason}
        result = await self.store.fail_step(
            claim, retry=decision.retry, delay_ms=decision.delay_ms, error=error
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
            next_retry_at_ms=result.next_retry_at_ms,
        )

    async def _park(self, run: _ExecutionRun, claim: StepClaim, parked: StepParked) -> None:
        await self.store.release_step(claim)
        if self.on_park is not None:
            await self.on_park(claim, parked, run.snapshot)
        await self._emit(
            "step.parked",
            run.execution_id,
            run.snapshot,
            step=claim.step_name,
            waiting_key=parked.waiting_key,
        )

    async def _after_transition(
        self,
        run: _ExecutionRun,
        claim: StepClaim,
        outcome: TransitionOutcome,
        converged: bool,
        event: str,
        worker_id: str,
        **attributes: Any,
    ) -> None:
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
        run.wake.set()
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
