"""The batch claim path, taken when no step of the execution is concurrency gated.

Owns `BatchPath`: each round trip reports the steps a worker executed and claims its next
batch (`advance_steps`, sized by the execution's `ClaimSizer`), a long step handing the
not-started rest of its batch back to idle workers, a worker that holds a wanted permit
past its time slice reporting only and ending its round, and reading why a claim came back
empty, and telling the assistance hook when the ready steps outnumber the execution's workers
here. Must not run a step or make its transition itself: its `StepRunner` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runtime_core.dag._engine_settings import SUPERSEDED_STATUS
from runtime_core.dag._records import ClaimBatch, ClaimOutcome, StepClaim
from runtime_core.dag._step_runner import StepRunner
from runtime_core.dag._worker_permits import Permit
from runtime_core.dag._worker_state import Completion, Idle

# A batch of claimed steps is sized for steps that take less than a round trip; one running
# longer than this hands the rest of its batch back to idle workers.
HAND_BACK_AFTER_S = 0.05


class BatchPath:
    def __init__(self, steps: StepRunner) -> None:
        self.steps = steps

    async def advance(self, permit: Permit | None = None) -> Idle | None:
        """Report what this worker executed and claim its next batch, round trip after round
        trip, until nothing is claimable or another execution's worker waits for this one's
        permit (then it only reports)."""
        steps, run = self.steps, self.steps.run
        done: list[Completion] = []
        holding = False
        try:
            while True:
                # Another worker waits for this one's permit and it has held it for a time
                # slice: report only and end the round, so one execution's long streak of
                # steps cannot starve the other runs of the process.
                handing_off = bool(done) and permit is not None and permit.should_hand_off()
                claim_count = run.sizer.size() if run.advancing and not handing_off else 0
                advanced = await steps.advance(done, claim_count)
                if run.help_threshold is not None:
                    await steps.tell_backlog(advanced.backlog)
                await steps.report(done, advanced)
                done = []
                batch = advanced.claims
                if claim_count == 0 or not batch.claims:
                    return await self._nothing_claimed(batch) if claim_count else None
                if not holding:
                    holding, run.holding = True, run.holding + 1
                await steps.settle_resuming(batch)
                done = await self._execute(batch.claims)
                if not done and not run.advancing:
                    return None
        finally:
            if holding:
                run.holding -= 1

    async def _execute(self, claims: list[StepClaim]) -> list[Completion]:
        """Run a claimed batch in order; the completions still to report.

        A batch is sized for fast steps, so when one is still running after
        `HAND_BACK_AFTER_S` (a model call, a step waiting on something), the steps of the batch
        that finished are reported at once and the ones not started are handed back (Ready, no
        retry used) for idle workers to run meanwhile, instead of waiting behind it (not when
        the check itself came late: see `_BatchProgress.recheck_in`)."""
        if len(claims) == 1:
            completion = await self.steps.execute(claims[0])
            return [completion] if completion is not None else []
        batch = _BatchProgress(claims)
        loop = asyncio.get_running_loop()

        def check() -> None:
            """One timer per batch: spill once the current step has run for the whole delay."""
            delay = batch.recheck_in(loop.time())
            if delay is not None:
                batch.arm(loop, delay, check)
            elif batch.done or batch.not_started:
                finished, not_started = batch.take_for_spill()
                batch.spill = asyncio.ensure_future(self._spill(finished, not_started))

        batch.arm(loop, HAND_BACK_AFTER_S, check)
        try:
            for claim in claims:
                if batch.spill is not None:
                    break
                batch.step_started = loop.time()
                completion = await self.steps.execute(claim)
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

    async def _spill(self, finished: list[Completion], not_started: list[StepClaim]) -> None:
        """Report the batch's finished steps now and hand its not-started ones back."""
        steps, run = self.steps, self.steps.run
        if finished:
            advanced = await steps.advance(finished, 0)
            await steps.report(finished, advanced)
        # Each its own transition, made together: one after the other, a batch's 31 releases
        # were as many round trips while the steps waited to be claimed again.
        await asyncio.gather(*(steps.release(claim) for claim in not_started))
        for claim in not_started:
            await steps.context.emit(
                "step.handed_back",
                run,
                step=claim.step_name,
                worker_id=steps.worker_id,
                reason="claimed in a batch behind a long-running step",
            )
        if not_started:
            run.idle.wake(len(not_started))
            if run.help_threshold is not None:  # they wait while this process's workers are busy
                await steps.tell_backlog(len(not_started))

    async def _nothing_claimed(self, batch: ClaimBatch) -> Idle | None:
        """Why a claim came back empty: the execution ended, control blocks claims, or nothing
        is claimable before `next_eligible_ms`."""
        run = self.steps.run
        if batch.outcome in (ClaimOutcome.EXECUTION_MISSING, ClaimOutcome.EXECUTION_TERMINAL):
            run.stop(final_status=batch.detail or None)
            return None
        if batch.outcome is ClaimOutcome.SUPERSEDED:
            run.stop(final_status=SUPERSEDED_STATUS)
            return None
        if batch.outcome is ClaimOutcome.CONTROL_BLOCKED:
            await self.steps.on_blocked(batch.detail)
            return Idle(batch.now_ms)
        return Idle(batch.now_ms, batch.next_eligible_ms)


class _BatchProgress:
    """How far a worker got through a claimed batch, for `BatchPath._execute`'s spill timer."""

    def __init__(self, claims: list[StepClaim]) -> None:
        self.claims = claims
        self.ran = 0  # claims run to their end so far; the one at this index is running
        self.done: list[Completion] = []
        self.step_started = 0.0
        self.timer: asyncio.TimerHandle
        self.due = 0.0  # loop time the timer was set for
        self.spill: asyncio.Future[None] | None = None

    def arm(self, loop: asyncio.AbstractEventLoop, delay: float, check: Callable[[], None]) -> None:
        self.due = loop.time() + delay
        self.timer = loop.call_later(delay, check)

    def recheck_in(self, now: float) -> float | None:
        """When the timer fired at `now`: None when the running step has run for the whole
        delay, else in how long to look again. A timer that fired late (by half the delay or
        more) looks again a whole delay later: the process was busy (other workers, or its
        share of a busy CPU), so the step may merely have waited for its turn, and handing a
        batch of fast steps back then costs more than it saves."""
        waited = now - self.step_started
        if now - self.due >= HAND_BACK_AFTER_S / 2:
            return HAND_BACK_AFTER_S
        if waited < HAND_BACK_AFTER_S:
            return HAND_BACK_AFTER_S - waited
        return None

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
