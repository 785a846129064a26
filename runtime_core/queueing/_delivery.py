"""Run delivery: reserve a slot -> provider dispatch -> mark Dispatched -> release the slot.

Owns the one ordered path both the shared queue dispatcher and DirectDispatch submit use
once admission chose candidates: try each candidate's Lua reservation (TTL), dispatch
through its provider with the run's snapshot, and only after provider success call the
caller's `mark` transition. A failed dispatch releases the reservation and creates no
identity; a mark refused after a successful dispatch cancels the orphan local run.

Each provider call is one dispatch attempt with a fresh id (run attribute
`dispatch.attempt.id`), traced as a `dispatch` span under the run's span (the run's trace
context travels to the instance as the run attribute `trace.context`). When the call fails,
the outcome is unknown (the reply may have been lost after the instance accepted the run),
so the attempt is settled in the run index before anything is requeued: if the instance had
accepted it, the delivery proceeds as a successful dispatch with that LocalRunId; otherwise
the attempt is abandoned, an instance receiving it later refuses it, and the delivery
fails. A run is thus never queued locally twice for one failed call. Must not claim queue
items or decide admission.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from runtime_core.errors import RuntimeCoreError
from runtime_core.hot_state import retry_while_unavailable
from runtime_core.identity import new_claim_token
from runtime_core.instances import (
    ABANDONED_ATTEMPT,
    DISPATCH_ATTEMPT_KEY,
    AdmissionCandidate,
    AdmissionDecision,
    LocalRunStatus,
    Reservation,
    ReservationStore,
    RunExecutionIndex,
)
from runtime_core.observability import TRACE_CONTEXT_KEY, RunTraceContext, dispatch_span
from runtime_core.providers import CancelRunRequest, DispatchRequest, DispatchResponse, ProviderSelector
from runtime_core.queueing._journal import SharedRunJournal
from runtime_core.queueing._models import DispatchOutcome, PumpIdentity, SharedRunRecord
from runtime_core.queueing._queue import QueueTransition

log = logging.getLogger("runtime_core.queueing")

DEFAULT_RESERVATION_TTL_MS = 30_000

MarkDispatched = Callable[[dict[str, str]], Awaitable[QueueTransition]]


@dataclass(frozen=True)
class Delivery:
    outcome: DispatchOutcome
    reason: str
    runtime_instance_id: str | None = None
    local_run_id: str | None = None


class RunDelivery:
    def __init__(
        self,
        reservations: ReservationStore,
        providers: ProviderSelector,
        *,
        reservation_ttl_ms: int = DEFAULT_RESERVATION_TTL_MS,
        journal: SharedRunJournal | None = None,
        index: RunExecutionIndex | None = None,
    ) -> None:
        self.reservations = reservations
        self.providers = providers
        self.reservation_ttl_ms = reservation_ttl_ms
        self.journal = journal or SharedRunJournal()
        # The instances write their run index in the same hot state as the reservations.
        self.index = index or RunExecutionIndex(reservations.hot_state)

    async def deliver(
        self,
        run: SharedRunRecord,
        decision: AdmissionDecision,
        mark: MarkDispatched,
        pump: PumpIdentity | None = None,
    ) -> Delivery:
        for candidate in decision.candidates:
            reservation = await self.reservations.reserve(
                candidate.runtime_instance_id, run.shared_run_id, self.reservation_ttl_ms
            )
            if reservation.outcome.held:
                return await self._deliver_reserved(run, decision, candidate, reservation, mark, pump)
        return Delivery(DispatchOutcome.NO_CAPACITY, "every candidate runtime instance is fully reserved")

    async def _deliver_reserved(
        self,
        run: SharedRunRecord,
        decision: AdmissionDecision,
        candidate: AdmissionCandidate,
        reservation: Reservation,
        mark: MarkDispatched,
        pump: PumpIdentity | None,
    ) -> Delivery:
        rid = candidate.runtime_instance_id
        attempt_id = new_claim_token()
        lost_reply: dict[str, str] = {}
        try:
            response = await self._dispatch(run, candidate, pump, attempt_id)
        except Exception as exc:  # any provider failure: the outcome of the attempt is unknown
            reason = exc.message if isinstance(exc, RuntimeCoreError) else f"{type(exc).__name__}: {exc}"
            accepted = await self._accepted_despite_failure(run, rid, attempt_id, reason)
            if accepted is None:
                await self.reservations.release(rid, run.shared_run_id)
                await self.journal.record(run, "dispatch_failed", runtime_instance=rid, reason=reason)
                return Delivery(DispatchOutcome.FAILED, f"dispatch to '{rid}' failed: {reason}", rid)
            response, lost_reply = accepted, {"provider_error": reason}
        fields = self._dispatched_fields(response, candidate, reservation, decision, pump)
        try:
            marked = await mark(fields)
        finally:
            await self.reservations.release(rid, run.shared_run_id)
        if not marked.applied:
            await self._cancel_orphan(response, candidate, marked)
            return Delivery(DispatchOutcome.CLAIM_LOST, f"dispatch not recorded: {marked.detail}", rid)
        await self.journal.record(
            run,
            "dispatched",
            local_run_id=response.local_run_id,
            assigned_runtime_instance_id=rid,
            **_pump_attributes(pump, run),
            provider=candidate.provider_name,
            **lost_reply,
        )
        return Delivery(DispatchOutcome.DISPATCHED, "dispatched", rid, response.local_run_id)

    async def _accepted_despite_failure(
        self, run: SharedRunRecord, runtime_instance_id: str, attempt_id: str, reason: str
    ) -> DispatchResponse | None:
        """The instance's acceptance of this attempt, if it won the settlement; None once abandoned."""
        # Settle through a Redis outage too: an unsettled attempt could still be accepted late.
        holder = await retry_while_unavailable(
            lambda: self.index.abandon_attempt(run.shared_run_id, attempt_id),
            "dispatch.settle_attempt",
            give_up_after_s=self.reservation_ttl_ms / 1000,
            logger=log,
            shared_run_id=run.shared_run_id,
        )
        if holder == ABANDONED_ATTEMPT:
            return None
        log.warning(
            "dispatch.accepted_despite_provider_error shared_run_id=%s local_run_id=%s",
            run.shared_run_id,
            holder,
            extra={"runtime_instance_id": runtime_instance_id, "error": reason},
        )
        # Exactly the reply that was lost: the instance answers an accepted dispatch with Queued.
        return DispatchResponse(
            runtime_instance_id=runtime_instance_id, local_run_id=holder, status=LocalRunStatus.QUEUED
        )

    async def _dispatch(
        self,
        run: SharedRunRecord,
        candidate: AdmissionCandidate,
        pump: PumpIdentity | None,
        attempt_id: str,
    ) -> DispatchResponse:
        attributes = {
            "shared_run_id": run.shared_run_id,
            "submit.mode": run.submit_mode.value,
            DISPATCH_ATTEMPT_KEY: attempt_id,
            **_pump_attributes(pump, run),
            **({TRACE_CONTEXT_KEY: run.trace_context} if run.trace_context else {}),
        }
        provider = self.providers.by_name(candidate.provider_name)
        request = DispatchRequest(
            runtime_instance_id=candidate.runtime_instance_id,
            shared_run_id=run.shared_run_id,
            pipeline=run.pipeline,
            input=run.input,
            snapshot=run.snapshot,
            attributes=attributes,
            resume_execution_id=run.resume_execution_id,
        )
        span_attributes = {
            "mcprt.shared_run.id": run.shared_run_id,
            "mcprt.runtime_instance.id": candidate.runtime_instance_id,
            "mcprt.provider.name": candidate.provider_name,
            "mcprt.dispatch.attempt_id": attempt_id,
            "gen_ai.workflow.name": run.pipeline.name,
        }
        run_trace = RunTraceContext.decode(run.trace_context)
        with dispatch_span(run_trace, f"dispatch {run.pipeline.name}", span_attributes) as span:
            response = await provider.dispatch(request)
            if span is not None:
                span.set_attribute("mcprt.local_run.id", response.local_run_id)
            return response

    @staticmethod
    def _dispatched_fields(
        response: DispatchResponse,
        candidate: AdmissionCandidate,
        reservation: Reservation,
        decision: AdmissionDecision,
        pump: PumpIdentity | None,
    ) -> dict[str, str]:
        fields = {
            "local_run_id": response.local_run_id,
            "assigned_runtime_instance_id": response.runtime_instance_id,
            "provider_name": candidate.provider_name,
            "reservation_expires_at_ms": str(reservation.expires_at_ms),
            "admission_decision": decision.kind.value,
            "admission_reason": decision.reason,
        }
        if pump is not None:
            fields["pump_runtime_instance_id"] = pump.pump_runtime_instance_id
            fields["pump_worker_id"] = pump.pump_worker_id
        return fields

    async def _cancel_orphan(
        self, response: DispatchResponse, candidate: AdmissionCandidate, marked: QueueTransition
    ) -> None:
        log.warning(
            "dispatch.orphan_cancelled",
            extra={"local_run_id": response.local_run_id, "detail": marked.detail},
        )
        await self.providers.by_name(candidate.provider_name).cancel_run(
            CancelRunRequest(
                runtime_instance_id=response.runtime_instance_id,
                local_run_id=response.local_run_id,
                reason=f"shared run dispatch not recorded ({marked.detail})",
                requested_by="shared-queue-dispatcher",
            )
        )


def _pump_attributes(pump: PumpIdentity | None, run: SharedRunRecord) -> dict[str, str]:
    """Who drained the run (never the assigned runtime by default, never another tenant's user)."""
    if pump is None:
        return {}
    return pump.attributes_for(run.snapshot.tenant_id if run.snapshot else None)
