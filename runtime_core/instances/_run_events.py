"""The end of a local run as a run event (`run.completed` / `run.failed` / `run.cancelled`).

Owns the mapping from a closed run-index record to its terminal RunEvent, whose id is the
run's terminal event id (one end per shared run, whatever attempt ends it), and announcing
it: the event is published (appended to the durable stream webhooks deliver from) only after
the closed record is stored, so whoever hears it and reads the run finds it done, and the run
leaves its instance's assigned set only after that, so an instance that dies in between
leaves the end to recovery, which announces it again (same event id). Must not close runs.
"""

from __future__ import annotations

from runtime_core.events import RunEvent, RunEventPublisher, RunEventType, terminal_event_id
from runtime_core.instances._models import LocalRunStatus
from runtime_core.instances._run_index import RunExecutionIndex, RunIndexRecord

_END_EVENTS = {
    LocalRunStatus.COMPLETED: RunEventType.COMPLETED,
    LocalRunStatus.FAILED: RunEventType.FAILED,
    LocalRunStatus.CANCELLED: RunEventType.CANCELLED,
}


def local_run_end(record: RunIndexRecord) -> RunEvent:
    event_type = _END_EVENTS[record.status]
    return RunEvent(
        event_id=terminal_event_id(event_type, record.shared_run_id, record.local_run_id),
        type=event_type,
        tenant_id=record.tenant_id,
        shared_run_id=record.shared_run_id,
        local_run_id=record.local_run_id,
        execution_id=record.execution_id,
        status=record.status.value,
        reason=record.failure_reason,
        at_ms=record.completed_at_ms or 0,
    )


async def announce_end(
    index: RunExecutionIndex, events: RunEventPublisher | None, record: RunIndexRecord
) -> None:
    """Publish the end of a closed local run, then let it leave its instance's assigned set."""
    if events is not None:
        await events.publish(local_run_end(record))
    await index.leave_assigned(record)
