"""The gated claim path, taken when a step of the execution is concurrency gated or rate limited.

Owns `GatedPath`: one step at a time, control gate -> policy admission -> lease -> the
provider's rate-limit budget -> DAG claim (a step the budget refuses stays Ready and waits
its retry-after: no attempt is spent), a lease given back at once when the claim was not
won, the denial memory updated from what the gate refused, and a lease released after its
step ran (waking the idle workers it held back). Must not run a step or make its transition
itself: its `StepRunner` does.
"""

from __future__ import annotations

import secrets

from runtime_core.concurrency import AdmissionDenial, LeaseDenial, LeaseGrant
from runtime_core.dag._engine_settings import SUPERSEDED_STATUS
from runtime_core.dag._keys import BLOCKING_CONTROL_STATUSES
from runtime_core.dag._records import ClaimOutcome
from runtime_core.dag._step_runner import StepRunner
from runtime_core.dag._worker_state import Idle


class GatedPath:
    def __init__(self, steps: StepRunner) -> None:
        self.steps = steps

    async def advance(self) -> Idle | None:
        """Claim and run one eligible step whose gate opens; Idle when none could be tried."""
        steps, run = self.steps, self.steps.run
        view = await steps.context.store.ready_steps(run.execution_id)
        if view.execution_status != "Running":
            run.stop(final_status=view.execution_status)
            return None
        if view.control_status in BLOCKING_CONTROL_STATUSES:
            await steps.on_blocked(view.control_status)
            return Idle(view.now_ms)
        for step_name in view.eligible_now():
            if not run.gates.open_for(step_name, view.now_ms):
                continue  # a denial on a shared scope may have just held it back
            run.gates.attempting.add(step_name)
            try:
                attempted = await self.claim(step_name, view.now_ms)
            finally:
                run.gates.attempting.discard(step_name)
            if attempted:
                return None
        wake_at = [
            t for t in (view.next_eligible_ms(), run.gates.next_retry_ms(view.now_ms)) if t is not None
        ]
        return Idle(view.now_ms, min(wake_at, default=None))

    async def claim(self, step_name: str, now_ms: int) -> bool:
        """Try one step; True when it ran or the execution state moved on (re-read it)."""
        steps, run = self.steps, self.steps.run
        context = steps.context
        grant = await self._acquire_lease(step_name, now_ms)
        if grant is None:
            return False
        batch = await context.store.claim_step(
            run.execution_id,
            step_name,
            lease_ms=context.settings.lease_ms,
            worker_id=steps.worker_id,
            token_prefix=steps.token_prefix,
            owner=context.owner,
        )
        if batch.outcome is ClaimOutcome.SUPERSEDED:
            run.stop(final_status=SUPERSEDED_STATUS)
        if batch.outcome is not ClaimOutcome.CLAIMED:
            await self._release_lease(grant)
            if grant.scope_keys:
                await context.emit(
                    "step.lease_released",
                    run,
                    step=step_name,
                    worker_id=steps.worker_id,
                    reason=f"claim not won: {batch.outcome.name}",
                )
            return batch.outcome in (
                ClaimOutcome.CONTROL_BLOCKED,
                ClaimOutcome.EXECUTION_TERMINAL,
                ClaimOutcome.EXECUTION_MISSING,
                ClaimOutcome.SUPERSEDED,
            )
        await steps.settle_resuming(batch)
        run.holding += 1
        try:
            completion = await steps.execute(batch.claims[0])
            if completion is not None:
                advanced = await steps.advance([completion], 0)
                await steps.report([completion], advanced)
        finally:
            run.holding -= 1
            await self._release_lease(grant)
        return True

    async def _acquire_lease(self, step_name: str, now_ms: int) -> LeaseGrant | None:
        """A grant (holding no scope when the step is not gated), or None when refused."""
        steps, run = self.steps, self.steps.run
        lease_id = f"{run.execution_id}:{step_name}:{steps.token_prefix}:{secrets.token_hex(4)}"
        effective = run.gates.effective.get(step_name)
        if effective is None:
            return await self._take_rate(step_name, now_ms, LeaseGrant(lease_id=lease_id))
        decision = await steps.context.gate.try_acquire(effective, lease_id)
        if isinstance(decision, LeaseGrant):
            return await self._take_rate(step_name, now_ms, decision)
        if isinstance(decision, AdmissionDenial):
            run.gates.deny_step(step_name, now_ms + decision.retry_after_ms)
            event, detail = "step.admission_denied", {"policy": decision.policy}
        else:
            assert isinstance(decision, LeaseDenial)
            run.gates.deny_scope(decision.scope_key, now_ms + decision.retry_after_ms)
            event = "step.lease_denied"
            detail = {"scope_key": decision.scope_key, "current": decision.current, "limit": decision.limit}
        await steps.context.emit(
            event,
            run,
            step=step_name,
            worker_id=steps.worker_id,
            reason=decision.reason,
            retry_after_ms=decision.retry_after_ms,
            **detail,
        )
        return None

    async def _take_rate(self, step_name: str, now_ms: int, grant: LeaseGrant) -> LeaseGrant | None:
        """The grant, once the step's provider budget (if any) took a unit; else None (the lease
        goes back and the step waits until the budget conforms again)."""
        steps, run = self.steps, self.steps.run
        provider = run.gates.providers.get(step_name)
        limiter = steps.context.rate_limiter
        if provider is None or limiter is None:
            return grant
        refusal = await limiter.take(provider)
        if refusal is None:
            return grant
        await self._release_lease(grant)
        run.gates.deny_step(step_name, now_ms + refusal.retry_after_ms)
        await steps.context.emit(
            "step.rate_limited",
            run,
            step=step_name,
            worker_id=steps.worker_id,
            budget=refusal.budget,
            limit=refusal.limit,
            retry_after_ms=refusal.retry_after_ms,
        )
        return None

    async def _release_lease(self, grant: LeaseGrant) -> None:
        if not grant.scope_keys:
            return
        await self.steps.context.gate.release(grant)
        self.steps.run.gates.lift_scopes(grant.scope_keys)
        self.steps.run.idle.wake()
