"""Evidence of the shared-run lifecycle: submitted, queued, dispatched, requeued, ...

Owns turning a shared-run transition into one `shared_run.<event>` LedgerEntry that carries
the tenant of the run's stored snapshot (never anything else) and its identities (the
`submitted` entry also the snapshot's attributes: why the run exists), and into
the matching run event (`runtime_core.events`) for subscribers; a rejection or a
cancellation before dispatch is the end of the run, a durable event webhooks deliver, and
the end of its `invoke_workflow` span (no execution will finalize it).
Entries are buffered by the LedgerRecorder (queries flush first). Without an audit store
(bare control planes in tests) no entry is written; without a publisher no event. A failed
event publication is logged, never raised: the transition already happened. Must not
change any state.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from runtime_core.audit import LedgerRecorder
from runtime_core.errors import RuntimeCoreError
from runtime_core.events import RunEvent, RunEventPublisher, RunEventType, terminal_event_id
from runtime_core.observability import end_unexecuted_run_span
from runtime_core.queueing._models import SharedRunRecord, SharedRunStatus
from runtime_core.storage import LedgerEntry

log = logging.getLogger("runtime_core.queueing")

_RUN_EVENTS: dict[str, tuple[RunEventType, SharedRunStatus]] = {
    "submitted": (RunEventType.SUBMITTED, SharedRunStatus.SUBMITTED),
    "queued": (RunEventType.QUEUED, SharedRunStatus.QUEUED_GLOBALLY),
    "requeued": (RunEventType.REQUEUED, SharedRunStatus.QUEUED_GLOBALLY),
    "dispatched": (RunEventType.DISPATCHED, SharedRunStatus.DISPATCHED),
    "scale_out_requested": (RunEventType.SCALE_OUT_REQUESTED, SharedRunStatus.SCALE_OUT_REQUESTED),
    "rejected": (RunEventType.REJECTED, SharedRunStatus.REJECTED),
    "cancelled": (RunEventType.CANCELLED, SharedRunStatus.CANCELLED),
}
# The ends of a run that never executed.
_UNEXECUTED_ENDS = {"rejected": SharedRunStatus.REJECTED, "cancelled": SharedRunStatus.CANCELLED}


def submitted_entry_id(shared_run_id: str) -> str:
    """The one `shared_run.submitted` ledger entry of a run."""
    return f"led_submitted_{shared_run_id}"


class SharedRunJournal:
    def __init__(self, ledger: LedgerRecorder | None = None, events: RunEventPublisher | None = None) -> None:
        self.ledger = ledger
        self.events = events

    async def record(
        self,
        run: SharedRunRecord,
        event: str,
        *,
        local_run_id: str | None = None,
        assigned_runtime_instance_id: str | None = None,
        **attributes: str,
    ) -> None:
        if run.snapshot is None:
            return
        if event in _UNEXECUTED_ENDS:
            end_unexecuted_run_span(
                run.trace_context, shared_run_id=run.shared_run_id, status=_UNEXECUTED_ENDS[event].value
            )
        if self.ledger is not None:
            await self.ledger.append(
                self._entry(run, event, local_run_id, assigned_runtime_instance_id, attributes)
            )
        await self._publish(run, event, local_run_id, attributes.get("reason"))

    async def record_submitted(self, run: SharedRunRecord, *, announce: bool = True) -> None:
        """The run's creation, written once whoever writes it: the entry's id is the run's own
        (`submitted_entry_id`), so the retried submit that found the run its lost-reply call
        created adds no second entry, and writes the first when that call never did."""
        if run.snapshot is None:
            return
        if self.ledger is not None:
            entry = self._entry(run, "submitted", None, None, {})
            created = {"recorded_at": datetime.fromtimestamp(run.created_at_ms / 1000, UTC)}
            update = {
                "entry_id": submitted_entry_id(run.shared_run_id),
                **(created if run.created_at_ms else {}),
            }
            await self.ledger.append(entry.model_copy(update=update))
        if announce:
            await self._publish(run, "submitted", None, None)

    @staticmethod
    def _entry(
        run: SharedRunRecord,
        event: str,
        local_run_id: str | None,
        assigned_runtime_instance_id: str | None,
        attributes: dict[str, str],
    ) -> LedgerEntry:
        assert run.snapshot is not None
        return LedgerEntry(
            tenant_id=run.snapshot.tenant_id,
            shared_run_id=run.shared_run_id,
            local_run_id=local_run_id,
            assigned_runtime_instance_id=assigned_runtime_instance_id,
            runtime_instance_id=attributes.get("pump.runtime.instance.id"),
            event=f"shared_run.{event}",
            attributes={
                "submit.mode": run.submit_mode.value,
                "user.id": run.snapshot.user_id,
                **(run.snapshot.attributes if event == "submitted" else {}),
                **attributes,
            },
        )

    async def _publish(
        self, run: SharedRunRecord, event: str, local_run_id: str | None, reason: str | None
    ) -> None:
        mapped = _RUN_EVENTS.get(event)
        if self.events is None or mapped is None or run.snapshot is None:
            return
        event_type, status = mapped
        run_event = RunEvent(
            event_id=terminal_event_id(event_type, run.shared_run_id, None),
            type=event_type,
            tenant_id=run.snapshot.tenant_id,
            shared_run_id=run.shared_run_id,
            local_run_id=local_run_id,
            status=status.value,
            reason=reason or None,
        )
        if not run_event.durable:  # queued, dispatched, ...: batched with the process's others
            self.events.emit(run_event)
            return
        try:
            await self.events.publish(run_event)
        except RuntimeCoreError as exc:
            log.warning(
                "run_events.publish_failed",
                extra={"shared_run_id": run.shared_run_id, "tenant_id": run.tenant_id, "error": exc.message},
            )
