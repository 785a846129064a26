"""DagEngine: N stateless workers advancing one execution only through the DagStore.

Owns what the engine is wired with (store, executors, retry decider, observer, result codec,
the hooks execution control, retention and tracing plug in, and the `owner` and worker
permits a runtime instance sets on its copy), creating and reassigning executions, and
`validate`, the one full pipeline check (create time, shared-run submit and the
`pipelines.validate` tool all call it). A creation its caller advances at once
(`claim_first`: a runtime instance's run) claims the first step for the workers in the same
call; the workers' first round starts from that claim. `run` starts the execution's workers (`WorkerLoop`)
and returns once they stopped: at a terminal status, or parked by execution control; `assist`
starts workers of an instance assisting another instance's execution, which return once
nothing is claimable. Must not claim steps or make their transitions itself, nor write state
a Lua script guards.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from typing import Any

from runtime_core.concurrency import ConcurrencyGate, parallelism_limit
from runtime_core.dag._batching import ClaimSizer
from runtime_core.dag._engine_settings import (
    PARKED_CONTROL_STATUSES,
    AssistanceHook,
    ControlSettler,
    EngineSettings,
    InlineResults,
    InputReader,
    ParkHandler,
    ResultCodec,
    RetryDecider,
)
from runtime_core.dag._events import EngineEvent, ExecutionObserver, NullObserver, wants_final_view
from runtime_core.dag._gating import StepGates, validate_step_policies
from runtime_core.dag._invocation import StepInvoker
from runtime_core.dag._records import AdvanceResult, ExecutionMeta, FirstClaim, ReassignOutcome
from runtime_core.dag._step_tracing import NoStepTracing, StepTracing
from runtime_core.dag._store import DagStore
from runtime_core.dag._width import widest_layer
from runtime_core.dag._worker_context import WorkerContext
from runtime_core.dag._worker_loop import WorkerLoop
from runtime_core.dag._worker_permits import Permit, WorkerPermits
from runtime_core.dag._worker_state import ExecutionRun
from runtime_core.errors import InvalidPipelineError, NotFoundError
from runtime_core.flow import StepRateLimiter
from runtime_core.identity import ExecutionContextSnapshot, new_execution_id
from runtime_core.pipeline import (
    PipelineDefinition,
    RetentionCheck,
    check_size,
    dumps_strict,
    validate_pipeline,
)
from runtime_core.steps import ExecutorRegistry, check_step_configs, check_steps_for_tenant


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
        # Provider-key rate limits of steps (the providers file's `rate_limits`); None: none.
        self.rate_limiter: StepRateLimiter | None = None
        # Execution-control hooks; `runtime_core.control.attach_execution_control` sets them
        # (and `read_human_input`, kept by the invoker).
        self.on_park: ParkHandler | None = None
        self.settle_control: ControlSettler | None = None
        # The retention engine's `validate`; `runtime_core.bootstrap` sets it with the audit wiring.
        self.check_retention: RetentionCheck | None = None
        # Spans around step invocations; `runtime_core.bootstrap` sets it when tracing is on.
        self.step_tracing: StepTracing = NoStepTracing()
        # Told when an execution's ready steps outnumber its workers here (a runtime instance
        # sets it on its copy: `runtime_core.assistance` asks other instances for help).
        self.assistance: AssistanceHook | None = None
        # What this engine just stored by creating an execution (its metadata, gates and the
        # claims made with it): the `run` that follows starts from it instead of reading it
        # back (consumed once).
        self._created: _Created | None = None

    def with_settings(self, settings: EngineSettings) -> DagEngine:
        """A copy of this engine (same store, executors and hooks) working with `settings`
        (its invoker too: step leases are renewed with the copy's lease)."""
        engine = copy.copy(self)
        engine.settings = settings
        engine.invoker = copy.copy(self.invoker)
        engine.invoker.settings = settings
        return engine

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
        claim_first: bool = False,
    ) -> str:
        """Validate pipeline, policies and input, then create the hot DAG state; returns the ExecutionId.

        A rejected pipeline or input raises a RuntimeCoreError and stores nothing.
        `claim_first`: this engine copy's `run` follows at once (the creator's workers claim
        as its `owner`), so the creation also claims the first step for them (unless its steps
        are gated), holding a worker permit from before the claim until the first worker runs
        it (as a worker holds its permit from its claim on: a step is never claimed to wait
        for a worker, where a cancel would not stop it). Call `release_first_claims` when the
        run does not follow.
        """
        self.check_input(state)
        self.validate(pipeline)
        execution_id = execution_id or new_execution_id()
        gates, first_claim, permit = None, None, None
        if claim_first:
            gates = self._gates(pipeline, execution_id)
            if not gates.active:  # a gated step is claimed only once its gates admit it
                # One step: a worker's first claim (its ClaimSizer measured nothing yet).
                first_claim = FirstClaim.for_creation(execution_id, 1, self.settings.lease_ms)
                permit = await self.worker_permits.acquire() if self.worker_permits else None
        try:
            created, first = await self.store.create_claiming(
                execution_id, pipeline, state, snapshot, attributes, first_claim
            )
        except BaseException:
            self._give_back(permit)
            raise
        if first is None or not first.claims.claims:
            self._give_back(permit)
            first, permit = None, None
        self._created = _Created(created, gates, first, permit) if created is not None else None
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

    async def release_first_claims(self) -> None:
        """Hand back the steps the last creation claimed for a `run` that will not follow
        (Ready again, no retry used), and their worker permit: e.g. its run was cancelled
        before it started. Called again after a failure, it releases them all again (a step
        already handed back is left as it is: its token no longer holds it)."""
        self.drop_first_permit()
        created = self._created
        if created is None or created.first is None:
            return
        for claim in created.first.claims.claims:
            await self.store.release_step(claim)
        self._created = dataclasses.replace(created, first=None)

    def drop_first_permit(self) -> None:
        """Give back the worker permit the last creation holds for its `run`, when that run
        will not follow (its claims' leases then lapse: its workers recover them as stale)."""
        created = self._created
        if created is not None and created.permit is not None:
            self._give_back(created.permit)
            self._created = dataclasses.replace(created, permit=None)

    def _give_back(self, permit: Permit | None) -> None:
        if permit is not None and self.worker_permits is not None:
            self.worker_permits.release(permit)

    def validate(self, pipeline: PipelineDefinition) -> None:
        """Every check `create_execution` makes on a pipeline: shape, step keys, retention, retry and
        concurrency policies, each step's config against its step type's config model, and that
        step configs name providers configured here. Submit and `pipelines.validate` call it so a
        bad pipeline is refused before it is queued; the first broken rule raises
        InvalidPipelineError."""
        validate_pipeline(pipeline, self.executors.keys(), check_retention=self.check_retention)
        validate_step_policies(pipeline, self.retry.validate)
        check_step_configs(pipeline.steps, self.executors)

    async def check_for_tenant(
        self, pipeline: PipelineDefinition, snapshot: ExecutionContextSnapshot
    ) -> None:
        """The submit-time checks that depend on who submits (after `validate`): e.g. a `mcp.tool`
        step names one of the tenant's own MCP servers and fits its tool's input schema."""
        await check_steps_for_tenant(pipeline.steps, self.executors, snapshot)

    async def reassign_execution(
        self, execution_id: str, snapshot: ExecutionContextSnapshot | None, attributes: dict[str, str]
    ) -> ReassignOutcome:
        """Give a Running execution the run attributes of the attempt that continues it.

        Emits `execution.reassigned` (with the replaced values) when something changed, so the
        ledger re-reads the run identity: events from now on name the new attempt.
        """
        result = await self.store.reassign_execution(execution_id, attributes)
        if result.outcome is ReassignOutcome.REASSIGNED:
            await self.observer.on_event(
                EngineEvent(
                    "execution.reassigned", execution_id, snapshot, attributes={"previous": result.previous}
                )
            )
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
        context = self.worker_context()
        created = self._created is not None and self._created.meta.execution_id == execution_id
        run = await context.until_available(lambda: self._load(execution_id), "engine.load", execution_id)
        cap = parallelism_limit(run.meta.pipeline.config)
        # No more workers than steps: a worker with nothing to claim still costs a claim call.
        count = max(1, min(workers, cap or workers, len(run.steps)))
        # A pipeline capping its own parallelism is never assisted (the cap is per execution).
        run.workers, run.help_threshold = count, None if cap else count
        try:
            if created and run.help_threshold is not None and context.assistance is not None:
                # Just created and wider than its workers: ask now, so assistants read its
                # definition while these workers start, instead of after the first backlog.
                if widest_layer(run.meta.pipeline) > count:
                    run.help_wanted = run.help_expected = True
                    await context.assistance.wants_help(run.meta, 0, count)
            return await self._advance(context, run, watched)
        finally:
            if run.first_permit is not None:  # no worker took it (the run stopped first)
                self._give_back(run.first_permit)
                run.first_permit = None
            if run.help_wanted and context.assistance is not None:
                run.help_wanted = False
                await context.assistance.settled(run.meta)

    async def _advance(self, context: WorkerContext, run: ExecutionRun, watched: bool) -> str:
        execution_id = run.execution_id
        while True:
            await self._workers(context, run, "w")
            if run.final_status is not None or run.parked_status is None:
                if run.final_status:
                    return run.final_status
                status = await context.until_available(
                    lambda: self.store.execution_status(execution_id), "engine.status", execution_id
                )
                return status or ""
            if watched:
                return run.parked_status
            control = await context.until_available(
                lambda: self.store.control_status(execution_id), "engine.control_status", execution_id
            )
            if control in PARKED_CONTROL_STATUSES:
                return control
            # Resumed (or input arrived) while the workers were stopping: advance again.
            run.parked_status, run.stopped = None, False

    async def assist(
        self, execution_id: str, *, workers: int, claimer: str, meta: ExecutionMeta | None = None
    ) -> str:
        """Advance another runtime instance's execution as its assistant, with `workers`
        workers claiming as `claimer` ('@<assistant>', accepted while the assistance lease
        holds), until nothing is claimable. Returns the terminal or parked status it saw,
        SUPERSEDED_STATUS when the assistance lease lapsed, else "" (it simply ran out of
        claimable steps). `meta`: the execution's metadata, when the caller has it already."""
        context = dataclasses.replace(self.worker_context(), owner=claimer, assisting=True)
        run = await context.until_available(
            lambda: self._load(execution_id, meta), "engine.assist_load", execution_id
        )
        run.workers = max(1, min(workers, len(run.steps)))
        await self._workers(context, run, "assist-w")
        return run.final_status or run.parked_status or ""

    async def _workers(self, context: WorkerContext, run: ExecutionRun, name: str) -> None:
        """`run.workers` workers named `<instance>/<name><n>`, until they all stopped."""
        async with asyncio.TaskGroup() as group:
            for n in range(run.workers):
                group.create_task(WorkerLoop(context, run, f"{self.instance_id}/{name}{n}").work())

    def worker_context(self) -> WorkerContext:
        """What the workers of a run started now work with."""
        return WorkerContext(
            store=self.store,
            settings=self.settings,
            retry=self.retry,
            invoker=self.invoker,
            gate=self.gate,
            rate_limiter=self.rate_limiter,
            observer=self.observer,
            step_tracing=self.step_tracing,
            on_park=self.on_park,
            settle_control=self.settle_control,
            worker_permits=self.worker_permits,
            owner=self.owner,
            assistance=self.assistance,
            final_view=wants_final_view(self.observer),
        )

    async def _load(self, execution_id: str, known: ExecutionMeta | None = None) -> ExecutionRun:
        created, self._created = self._created, None
        if created is None or created.meta.execution_id != execution_id:
            created = None
        meta = known or (created.meta if created else await self.store.load_meta(execution_id))
        if meta is None:
            raise NotFoundError(f"Execution '{execution_id}' not found.", hint="Check the ExecutionId.")
        gates = created.gates if created and created.gates else self._gates(meta.pipeline, execution_id)
        steps = {step.name: step for step in meta.pipeline.steps}
        run = ExecutionRun(meta, steps, gates, ClaimSizer(self.settings.claim_batch_size))
        run.completed = int(meta.attributes.get("completed_count") or 0)
        if created is not None:
            run.first_claims, run.first_permit = created.first, created.permit
        return run

    def _gates(self, pipeline: PipelineDefinition, execution_id: str) -> StepGates:
        limited = self.rate_limiter.limits if self.rate_limiter is not None else None
        return StepGates.resolve(pipeline, execution_id, self.instance_id, self.gate.scope_key, limited)


@dataclasses.dataclass(frozen=True)
class _Created:
    """An execution this engine copy just created: its metadata, its steps' gates (when
    resolved already) and the claims made with it (None: none)."""

    meta: ExecutionMeta
    gates: StepGates | None
    first: AdvanceResult | None
    permit: Permit | None = None  # held for the worker that runs `first`
