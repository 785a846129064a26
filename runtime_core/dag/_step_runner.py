"""StepRunner: one worker's hands on one execution, from a claimed step to its transition.

Owns running a claimed step (its event and span, the invoker call, the result's encoding),
the transition after it ran (completion reported with the next claim, failure -> retry or
Failed, parking for human input, a step handed back), waking this process's idle workers
for what became claimable, settling execution control (Pausing -> Paused, Resuming ->
Running), finalization once the execution converged, and asking for assistance (the engine's
hook) when the ready steps outnumber the workers. A completion, failure or release
is retried with the same claim token while Redis is unavailable (accepted at most once)
instead of being dropped. Must not choose which steps to claim (the batch and gated paths
do) and must not write state a Lua script guards.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

from runtime_core.dag._engine_settings import PARKED_CONTROL_STATUSES
from runtime_core.dag._records import (
    AdvanceResult,
    CanonicalResult,
    ClaimBatch,
    ExecutionView,
    Finalization,
    FinalizeOutcome,
    StepClaim,
    TransitionOutcome,
)
from runtime_core.dag._worker_context import WorkerContext
from runtime_core.dag._worker_state import Completion, ExecutionRun
from runtime_core.errors import ConflictError
from runtime_core.pipeline import StepDefinition
from runtime_core.steps import StepFailure, StepParked, result_usage, usage_attributes


class StepRunner:
    def __init__(self, context: WorkerContext, run: ExecutionRun, worker_id: str, token_prefix: str) -> None:
        self.context = context
        self.run = run
        self.worker_id = worker_id
        self.token_prefix = token_prefix  # of the claim tokens this worker's claims get

    async def execute(self, claim: StepClaim) -> Completion | None:
        """Run one claimed step; its completion to report, or None when it failed or parked
        (those transitions are made at once)."""
        context, run, worker_id = self.context, self.run, self.worker_id
        step = run.steps[claim.step_name]
        await context.emit(
            "step.claimed",
            run,
            step=step.name,
            worker_id=worker_id,
            retry_count=claim.retry_count,
            step_key=step.step_key,
        )
        tracing = context.step_tracing.step_span(run.meta, step, claim.retry_count, worker_id)
        invoker = context.invoker

        def emit(event: str, **attributes: Any) -> Awaitable[None]:
            return context.emit(event, run, step=step.name, worker_id=worker_id, **attributes)

        try:
            with tracing:  # the execution's snapshot is current: its `WorkerLoop` restored it
                lease = invoker.lease_kept(claim)
                started = time.perf_counter()
                try:
                    result = await invoker.invoke(run, step, claim, emit)
                finally:
                    # The executor's time only: the engine's own work per step (events,
                    # spans, encoding) is not what makes a claimed batch hold steps back.
                    run.sizer.record_step((time.perf_counter() - started) * 1000)
                    if lease.leave():
                        await lease.renewal_stopped()
            text = invoker.check_result(step, result)
        except StepParked as parked:
            await self._park(step, claim, parked)
            return None
        except StepFailure as failure:
            await self._fail(step, claim, failure)
            return None
        reported: Any = CanonicalResult(text)  # stored as it ran: the text just checked
        if not invoker.inline_results:
            stored = await context.until_available(
                lambda: invoker.results.encode(run.execution_id, step.name, result, run.snapshot, text=text),
                "step.encode",
                run.execution_id,
                step=step.name,
            )
            if stored is not result:  # the codec changed it (e.g. a payload reference)
                reported = stored
        return Completion(claim, reported, usage_attributes(result_usage(result)))

    async def _fail(self, step: StepDefinition, claim: StepClaim, failure: StepFailure) -> None:
        context, run = self.context, self.run
        seed = f"{run.execution_id}:{step.name}:{claim.retry_count}"
        decision = context.retry.decide(
            self._retry_config(step),
            failure.code,
            claim.retry_count,
            seed,
            retry_after_ms=failure.retry_after_ms,
        )
        error = {"code": failure.code, "message": failure.message, "reason": decision.reason}
        result = await context.until_available(
            lambda: context.store.fail_step(
                claim, retry=decision.retry, delay_ms=decision.delay_ms, error=error, claimer=context.owner
            ),
            "step.fail",
            run.execution_id,
            step=step.name,
        )
        event = "step.retry_scheduled" if decision.retry else "step.failed"
        await self._after_transition(
            claim,
            result.outcome,
            result.converged,
            event,
            code=failure.code,
            error=failure.message,
            retry_count=result.retry_count,
            retries_exhausted=decision.exhausted,
            next_retry_at_ms=result.next_retry_at_ms,
            **usage_attributes(failure.usage),
        )

    def _retry_config(self, step: StepDefinition) -> dict[str, Any]:
        """The step's config; without a `retry` section, with its step type's default one."""
        if "retry" in step.config:
            return step.config
        default = self.context.invoker.executors.default_retry(step.step_key)
        return step.config if default is None else {**step.config, "retry": default}

    async def _park(self, step: StepDefinition, claim: StepClaim, parked: StepParked) -> None:
        """Mark the execution WaitingForInput first, then hand the step back (Ready, no retry used)."""
        context, run = self.context, self.run
        on_park = context.on_park
        if on_park is None:
            failure = StepFailure(
                f"Step '{step.name}' waits for input under key '{parked.waiting_key}', but no execution "
                "control is attached to this engine to receive it.",
                code="permanent",
            )
            await self._fail(step, claim, failure)
            return
        try:
            await context.until_available(
                lambda: on_park(claim, parked, run.snapshot), "step.park", run.execution_id, step=step.name
            )
        except ConflictError as refused:  # paused/cancelled meanwhile: it parks again after resume
            await context.emit("step.park_refused", run, step=step.name, reason=refused.message)
        await self.release(claim)
        run.idle.wake()
        await context.emit(
            "step.parked",
            run,
            step=claim.step_name,
            worker_id=self.worker_id,
            waiting_key=parked.waiting_key,
            prompt=parked.prompt,
        )

    async def release(self, claim: StepClaim) -> None:
        """Hand a claimed step back: Ready again, no retry used (a parked or handed-back step)."""
        await self.context.until_available(
            lambda: self.context.store.release_step(claim),
            "step.release",
            self.run.execution_id,
            step=claim.step_name,
        )

    async def advance(self, done: list[Completion], claim_count: int) -> AdvanceResult:
        """One `advance_steps` call. Steps that ran are reported with the same tokens until
        Redis answers (accepted at most once); a bare claim fails over to the worker loop."""
        context, run = self.context, self.run
        if run.first_claims is not None and not done and claim_count:
            first, run.first_claims = run.first_claims, None  # claimed with the execution's creation
            return first
        started = time.perf_counter()
        final_view = bool(done) and context.final_view and run.completes_all(len(done))

        def call() -> Awaitable[AdvanceResult]:
            return context.store.advance(
                run.execution_id,
                [(completion.claim, completion.stored) for completion in done],
                max_claim=claim_count,
                lease_ms=context.settings.lease_ms,
                token_prefix=self.token_prefix,
                owner=context.owner,
                finalize=not context.assisting,  # see try_finalize
                # Its last steps: the terminal snapshot's read rides along (`_finalized`), when
                # an observer wants it (`WorkerContext.final_view`).
                final_view_of=run.meta.pipeline if final_view else None,
            )

        if done:
            advanced = await context.until_available(call, "step.advance", run.execution_id, steps=len(done))
        else:
            advanced = await call()
        run.sizer.record_call((time.perf_counter() - started) * 1000)
        return advanced

    async def tell_backlog(self, backlog: int) -> None:
        """Ask for assistance once more steps are ready than this process's workers of the
        execution (the hook keeps asking until told it is settled); settle once none are left.
        A run that asked at creation (`help_expected`) tells the hook when that backlog first
        appears and settles only after it did. Never from an assistant's workers."""
        hook, run = self.context.assistance, self.run
        if hook is None or self.context.assisting or run.help_threshold is None:
            return
        if backlog > run.help_threshold and (not run.help_wanted or run.help_expected):
            run.help_wanted, run.help_expected = True, False
            await hook.wants_help(run.meta, backlog, run.workers)
        elif run.help_wanted and backlog == 0 and not run.help_expected:
            run.help_wanted = False
            await hook.settled(run.meta)

    async def report(self, done: list[Completion], advanced: AdvanceResult) -> None:
        """Emit each completion's event, wake idle workers for what became claimable, and
        finalize once the execution converged with nothing left to run."""
        context, run, worker_id = self.context, self.run, self.worker_id
        released = 0
        for completion, result in zip(done, advanced.completed, strict=True):
            released += result.released
            if result.outcome is TransitionOutcome.APPLIED:  # nearly always: its event only
                run.completed += 1
                step = completion.claim.step_name
                attributes = completion.attributes
                await context.emit("step.completed", run, step=step, worker_id=worker_id, **attributes)
                continue
            await self._after_transition(completion.claim, result.outcome, False, "step.completed")
        others = released - len(advanced.claims.claims)
        if others > 0:
            run.idle.wake(others)
        if advanced.finalization is not None:  # this call converged it and finalized it
            await self._finalized(advanced.finalization, advanced.final_view)
        elif advanced.converged:
            await self.try_finalize()

    async def _after_transition(
        self,
        claim: StepClaim,
        outcome: TransitionOutcome,
        converged: bool,
        event: str,
        *,
        wake: int | None = None,
        **attributes: Any,
    ) -> None:
        """Emit the event, wake `wake` idle workers (None: all), finalize once converged."""
        context, run = self.context, self.run
        if outcome is not TransitionOutcome.APPLIED:
            await context.emit(
                "step.transition_rejected",
                run,
                step=claim.step_name,
                worker_id=self.worker_id,
                outcome=outcome.name,
                attempted=event,
            )
            return
        await context.emit(event, run, step=claim.step_name, worker_id=self.worker_id, **attributes)
        run.idle.wake(wake)
        if converged:
            await self.try_finalize()

    async def try_finalize(self) -> bool:
        """Finalize the execution once it converged; True when it is final (now or before).

        An assistant's workers never finalize: the owner's do (its idle workers notice the
        convergence at their next poll), so the run's end stays with its owning instance and
        the terminal snapshot sees the assistants that left by then."""
        if self.context.assisting:
            return False
        return await self._finalized(await self.context.store.finalize(self.run.execution_id))

    async def _finalized(self, finalization: Finalization, view: ExecutionView | None = None) -> bool:
        """Stop at a terminal status (emitting `execution.finalized` when this call made it,
        with the terminal `view` when it was read with it); False while not converged."""
        outcome, status, at_ms = finalization
        if outcome is FinalizeOutcome.NOT_CONVERGED:
            return False
        self.run.stop(final_status=status)
        if outcome is FinalizeOutcome.FINALIZED:
            await self.context.emit("execution.finalized", self.run, at_ms=at_ms, view=view, status=status)
        return True

    async def on_blocked(self, control_status: str) -> None:
        """Claims are blocked: stop when parked, settle Pausing -> Paused once drained."""
        context, run = self.context, self.run
        if control_status in PARKED_CONTROL_STATUSES:
            run.stop(parked_status=control_status)
            return
        if control_status != "Pausing" or context.settle_control is None:
            return  # Cancelling: the caller's finalize attempt applies it once drained
        if await context.settle_control(run.execution_id, control_status) == "Paused":
            await context.emit("execution.paused", run, worker_id=self.worker_id)
            run.stop(parked_status="Paused")

    async def settle_resuming(self, batch: ClaimBatch) -> None:
        """Work advanced while control said Resuming: it is Running again."""
        context, run = self.context, self.run
        if batch.control_status != "Resuming" or context.settle_control is None or run.settling:
            return
        run.settling = True
        try:
            if await context.settle_control(run.execution_id, "Resuming") == "Running":
                await context.emit("execution.resumed", run, worker_id=self.worker_id)
        finally:
            run.settling = False
