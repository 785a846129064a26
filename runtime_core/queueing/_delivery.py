"""Run delivery: reserve a slot -> provider dispatch -> mark Dispatched.

Owns the one ordered path both the shared queue dispatcher and DirectDispatch submit use
once admission chose candidates: try each candidate's Lua reservation (TTL), dispatch
through its provider with the run's snapshot, and only after provider success call the
caller's `mark` transition. A failed dispatch releases the reservation and creates no
identity; an accepted one leaves it to the instance, whose first published capacity that
counts the run releases it; a mark refused after a successful dispatch cancels the orphan
local run (the recording, its journal entry and its outage: `DispatchRecording`).

Each provider call is one dispatch attempt with a fresh id (run attribute
`dispatch.attempt.id`), traced as a `dispatch` span under the run's span (the run's trace
context travels to the instance as the run attribute `trace.context`). When the call fails,
the outcome is unknown (the reply may have been lost after the instance accepted the run),
so the attempt is settled in the run index before anything is requeued: if the instance had
accepted it, the delivery proceeds as a successful dispatch with that LocalRunId; otherwise
the attempt is abandoned, an instance receiving it later refuses it, and the delivery
fails. A run is thus never queued locally twice for one failed call.

A queued run's attempt id is its queue claim's token, so when the pump died between an
instance accepting the run and recording it (its claim lease lapsed), the next claimer
knows the dead claim's attempt: `settle_earlier_attempts` settles it (abandoned, unless an
instance accepted it) and hands back the accepted run to be recorded instead of being
dispatched again. The dispatch names the instance incarnation whose capacity it reserved,
so another incarnation of the same id refuses it. Must not claim queue items or decide
admission.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runtime_core.errors import RuntimeCoreError
from runtime_core.flow import FLOW_KEY_ATTRIBUTE
from runtime_core.hot_state import retry_while_unavailable
from runtime_core.identity import new_claim_token
from runtime_core.instances import (
    ABANDONED_ATTEMPT,
    DISPATCH_ATTEMPT_KEY,
    TARGET_INCARNATION_KEY,
    AdmissionCandidate,
    AdmissionDecision,
    LocalRunStatus,
    Reservation,
    ReservationStore,
    RunExecutionIndex,
)
from runtime_core.observability import TRACE_CONTEXT_KEY, RunTraceContext, dispatch_span
from runtime_core.providers import DispatchRequest, DispatchResponse, ProviderSelector
from runtime_core.queueing._journal import SharedRunJournal
from runtime_core.queueing._models import DispatchOutcome, PumpIdentity, SharedRunRecord
from runtime_core.queueing._recording import AcceptedRun, DispatchRecording, MarkDispatched
from runtime_core.queueing._run_store import SharedRunStore

log = logging.getLogger("runtime_core.queueing")

DEFAULT_RESERVATION_TTL_MS = 30_000


@dataclass(frozen=True)
class _Attempt:
    """One provider call: to this candidate, in this reservation, with this attempt id."""

    candidate: AdmissionCandidate
    reservation: Reservation
    id: str


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
        self.recording = DispatchRecording(self.journal, SharedRunStore(reservations.hot_state), providers)

    async def aclose(self) -> None:
        """Give up the recordings still waiting for Redis (see DispatchRecording)."""
        await self.recording.aclose()

    async def deliver(
        self,
        run: SharedRunRecord,
        decision: AdmissionDecision,
        mark: MarkDispatched,
        pump: PumpIdentity | None = None,
        *,
        attempt_id: str | None = None,
    ) -> Delivery:
        """`attempt_id`: the queue claim's token (a fresh id when None: DirectDispatch)."""
        for candidate in decision.candidates:
            reservation = await self.reservations.reserve(
                candidate.runtime_instance_id, run.shared_run_id, self.reservation_ttl_ms
            )
            if reservation.outcome.held:
                attempt = _Attempt(candidate, reservation, attempt_id or new_claim_token())
                return await self._deliver_reserved(run, decision, attempt, mark, pump)
        return Delivery(DispatchOutcome.NO_CAPACITY, "every candidate runtime instance is fully reserved")

    async def settle_earlier_attempts(self, run: SharedRunRecord, attempt_ids: list[str]) -> Delivery | None:
        """Settle the attempts of claims that lapsed (their pump died); the accepted run, if any.

        Each attempt is abandoned unless an instance had accepted it (then a late arrival of it
        is refused). An accepted one becomes this delivery: the caller records it as dispatched.
        """
        holders = await retry_while_unavailable(
            lambda: self.index.settle_attempts(run.shared_run_id, attempt_ids),
            "dispatch.settle_earlier_attempts",
            logger=log,
            shared_run_id=run.shared_run_id,
        )
        for holder in holders:
            if holder == ABANDONED_ATTEMPT:
                continue
            record = await self.index.get_local(holder)
            rid = record.runtime_instance_id if record is not None else None
            log.warning(
                "dispatch.accepted_before_pump_died shared_run_id=%s local_run_id=%s",
                run.shared_run_id,
                holder,
                extra={"shared_run_id": run.shared_run_id, "runtime_instance_id": rid},
            )
            return Delivery(DispatchOutcome.DISPATCHED, "accepted before its pump died", rid, holder)
        return None

    async def record_accepted(
        self,
        run: SharedRunRecord,
        accepted: Delivery,
        mark: MarkDispatched,
        pump: PumpIdentity | None = None,
    ) -> Delivery:
        """Record a run an instance accepted from an earlier (lapsed) claim; no new dispatch."""
        assert accepted.local_run_id is not None
        fields = {
            "local_run_id": accepted.local_run_id,
            "assigned_runtime_instance_id": accepted.runtime_instance_id or "",
            "admission_decision": "AcceptedBeforePumpDied",
            "admission_reason": accepted.reason,
            **_pump_fields(pump),
        }
        evidence = {**_pump_attributes(pump, run), "settled": "accepted before its pump died"}
        local = AcceptedRun(accepted.runtime_instance_id, accepted.local_run_id)
        marked = await self.recording.record(run, local, mark, fields, evidence)
        if not marked.applied:
            return Delivery(DispatchOutcome.CLAIM_LOST, f"dispatch not recorded: {marked.detail}")
        return accepted

    async def _deliver_reserved(
        self,
        run: SharedRunRecord,
        decision: AdmissionDecision,
        attempt: _Attempt,
        mark: MarkDispatched,
        pump: PumpIdentity | None,
    ) -> Delivery:
        candidate, reservation = attempt.candidate, attempt.reservation
        rid = candidate.runtime_instance_id
        lost_reply: dict[str, str] = {}
        try:
            response = await self._dispatch(run, attempt, pump)
        except Exception as exc:  # any provider failure: the outcome of the attempt is unknown
            reason = exc.message if isinstance(exc, RuntimeCoreError) else f"{type(exc).__name__}: {exc}"
            accepted = await self._accepted_despite_failure(run, rid, attempt.id, reason)
            if accepted is None:
                log.warning(
                    "dispatch.failed shared_run_id=%s runtime_instance_id=%s attempt_id=%s",
                    run.shared_run_id,
                    rid,
                    attempt.id,
                    extra={"shared_run_id": run.shared_run_id, "runtime_instance_id": rid, "error": reason},
                )
                await self.reservations.release(rid, run.shared_run_id)
                await self.journal.record(run, "dispatch_failed", runtime_instance=rid, reason=reason)
                return Delivery(DispatchOutcome.FAILED, f"dispatch to '{rid}' failed: {reason}", rid)
            response, lost_reply = accepted, {"provider_error": reason}
        fields = self._dispatched_fields(response, candidate, reservation, decision, pump)
        # The instance released the reservation with the first capacity it published that
        # counts the run (before answering the dispatch, or with its next heartbeat).
        evidence = {**_pump_attributes(pump, run), "provider": candidate.provider_name, **lost_reply}
        local = AcceptedRun(rid, response.local_run_id, candidate.provider_name)
        marked = await self.recording.record(run, local, mark, fields, evidence)
        if not marked.applied:
            return Delivery(DispatchOutcome.CLAIM_LOST, f"dispatch not recorded: {marked.detail}", rid)
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
        self, run: SharedRunRecord, attempt: _Attempt, pump: PumpIdentity | None
    ) -> DispatchResponse:
        attributes = {
            "shared_run_id": run.shared_run_id,
            "submit.mode": run.submit_mode.value,
            DISPATCH_ATTEMPT_KEY: attempt.id,
            **_pump_attributes(pump, run),
            **({TRACE_CONTEXT_KEY: run.trace_context} if run.trace_context else {}),
            **({FLOW_KEY_ATTRIBUTE: run.flow_key} if run.flow_key else {}),
        }
        if attempt.reservation.incarnation:
            attributes[TARGET_INCARNATION_KEY] = attempt.reservation.incarnation
        candidate = attempt.candidate
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
            "mcprt.dispatch.attempt_id": attempt.id,
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
        return {**fields, **_pump_fields(pump)}


def _pump_fields(pump: PumpIdentity | None) -> dict[str, str]:
    """The shared run's record of the pump that dispatched it."""
    if pump is None:
        return {}
    return {"pump_runtime_instance_id": pump.pump_runtime_instance_id, "pump_worker_id": pump.pump_worker_id}


def _pump_attributes(pump: PumpIdentity | None, run: SharedRunRecord) -> dict[str, str]:
    """Who drained the run (never the assigned runtime by default, never another tenant's user)."""
    if pump is None:
        return {}
    return pump.attributes_for(run.snapshot.tenant_id if run.snapshot else None)
