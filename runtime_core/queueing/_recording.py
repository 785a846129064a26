"""Recording a run an instance accepted: mark it Dispatched, then journal it or cancel the orphan.

Owns what follows an instance's acceptance of a run: the caller's `mark` transition (the
shared_mark_dispatched script, whose resend after a lost reply answers applied), then the
`shared_run.dispatched` ledger entry when it applied, or, when it was refused, the
cancellation of the local run it leaves (unless another claimer recorded that run, or will:
a lapsed claim's attempt is settled and recorded by the next claimer). When Redis does not
answer, the mark's outcome is unknown (it may have been applied and its reply lost): the
caller gets `RecordingInDoubtError` at once, and the mark is sent again in the background
until Redis answers, so the dispatch is journaled (or its orphan cancelled) whatever the
outage's length. `aclose` cancels those still waiting (logged with their runs). Must not
dispatch, claim or requeue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import retry_while_unavailable
from runtime_core.providers import CancelRunRequest, ProviderSelector
from runtime_core.queueing._journal import SharedRunJournal
from runtime_core.queueing._models import SharedRunRecord
from runtime_core.queueing._queue import QueueTransition
from runtime_core.queueing._run_store import SharedRunStore

log = logging.getLogger("runtime_core.queueing")

MarkDispatched = Callable[[dict[str, str]], Awaitable[QueueTransition]]
CLAIM_LAPSED = "claim_lapsed"
"""A mark's refusal when its claim expired with its attempt unsettled (shared_mark_dispatched)."""
RESENT = "resent"
"""A mark's answer when it had been applied already (its first reply was lost)."""


class RecordingInDoubtError(StoreUnavailableError):
    """Redis did not answer the recording of a run an instance accepted: it is sent again in the
    background until Redis answers. The claim must be left as it is (not requeued)."""


@dataclass(frozen=True)
class AcceptedRun:
    """The local run an instance accepted; `provider_name`: through which an orphan is
    cancelled (None: a refused recording leaves the run to whoever recorded it)."""

    runtime_instance_id: str | None
    local_run_id: str
    provider_name: str | None = None


class DispatchRecording:
    def __init__(self, journal: SharedRunJournal, runs: SharedRunStore, providers: ProviderSelector) -> None:
        self.journal = journal
        self.runs = runs
        self.providers = providers
        self._in_doubt: set[asyncio.Task[None]] = set()

    async def record(
        self,
        run: SharedRunRecord,
        accepted: AcceptedRun,
        mark: MarkDispatched,
        fields: dict[str, str],
        evidence: dict[str, str],
    ) -> QueueTransition:
        """Mark the run Dispatched with `fields`; journal it (with `evidence`) when that applied,
        else cancel the orphan. Raises RecordingInDoubtError when Redis does not answer."""
        try:
            marked = await mark(fields)
        except StoreUnavailableError as exc:
            task = asyncio.create_task(
                self._record_when_redis_answers(run, accepted, mark, fields, evidence),
                name=f"dispatch.record:{run.shared_run_id}",
            )
            self._in_doubt.add(task)
            task.add_done_callback(self._in_doubt.discard)
            raise RecordingInDoubtError(
                f"Redis did not answer while run '{run.shared_run_id}' was recorded as dispatched "
                f"to '{accepted.runtime_instance_id}' ({exc.message}); it is recorded once Redis answers.",
                hint="Nothing to do: read the run's status with run.status once Redis is back.",
            ) from exc
        await self._settle(run, accepted, marked, evidence)
        return marked

    async def aclose(self) -> None:
        """Stop waiting for Redis: the recordings still in doubt are given up (logged)."""
        for task in list(self._in_doubt):
            log.warning("dispatch.record_in_doubt_abandoned", extra={"task": task.get_name()})
            task.cancel()
        await asyncio.gather(*self._in_doubt, return_exceptions=True)

    async def _record_when_redis_answers(
        self,
        run: SharedRunRecord,
        accepted: AcceptedRun,
        mark: MarkDispatched,
        fields: dict[str, str],
        evidence: dict[str, str],
    ) -> None:
        context = {"shared_run_id": run.shared_run_id, "local_run_id": accepted.local_run_id}
        try:
            marked = await retry_while_unavailable(
                lambda: mark(fields), "dispatch.record_in_doubt", logger=log, **context
            )
            await self._settle(run, accepted, marked, evidence)
        except Exception:
            log.exception("dispatch.record_in_doubt_failed", extra=context)
            return
        log.info(
            "dispatch.recorded_after_outage shared_run_id=%s applied=%s",
            run.shared_run_id,
            marked.applied,
            extra={**context, "detail": marked.detail},
        )

    async def _settle(
        self, run: SharedRunRecord, accepted: AcceptedRun, marked: QueueTransition, evidence: dict[str, str]
    ) -> None:
        if marked.applied and marked.detail == RESENT:
            log.info(
                "dispatch.recorded_on_resend shared_run_id=%s",
                run.shared_run_id,
                extra={"shared_run_id": run.shared_run_id, "local_run_id": accepted.local_run_id},
            )
        if marked.applied:
            await self.journal.record(
                run,
                "dispatched",
                local_run_id=accepted.local_run_id,
                assigned_runtime_instance_id=accepted.runtime_instance_id,
                **evidence,
            )
        else:
            log.info(
                "dispatch.not_recorded shared_run_id=%s local_run_id=%s detail=%s",
                run.shared_run_id,
                accepted.local_run_id,
                marked.detail,
                extra={"shared_run_id": run.shared_run_id, "local_run_id": accepted.local_run_id},
            )
            if accepted.provider_name is not None:
                await self._cancel_orphan(run, accepted, accepted.provider_name, marked)

    async def _cancel_orphan(
        self, run: SharedRunRecord, accepted: AcceptedRun, provider_name: str, marked: QueueTransition
    ) -> None:
        """Cancel the local run a refused mark left, unless another claimer recorded it (it
        settled this attempt after this claim lapsed) or will (the claim lapsed: the next
        claimer settles this attempt and records the run the instance accepted)."""
        if marked.detail == CLAIM_LAPSED:
            return
        recorded = await self.runs.get(run.shared_run_id)
        if recorded is not None and recorded.local_run_id == accepted.local_run_id:
            return
        log.warning(
            "dispatch.orphan_cancelled",
            extra={"local_run_id": accepted.local_run_id, "detail": marked.detail},
        )
        await self.providers.by_name(provider_name).cancel_run(
            CancelRunRequest(
                runtime_instance_id=accepted.runtime_instance_id or "",
                local_run_id=accepted.local_run_id,
                reason=f"shared run dispatch not recorded ({marked.detail})",
                requested_by="shared-queue-dispatcher",
            )
        )
