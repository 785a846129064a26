"""Building the durable RunRecord of a finished run from its last hot state.

Owns turning a shared run record (and its queue item's last status), the local attempt that
ended it and its execution's terminal document into one `RunRecord`: identities, statuses
(the record's `status` is the most advanced of execution, local and shared), who submitted
it, timestamps, step rows (with each step's last error, and the step that failed a failed run
named in the failure reason, as `run.status` explains it while the run is hot) and the sink
steps' results in their stored form. Must not read or write any store.
"""

from __future__ import annotations

from datetime import datetime

from runtime_core.audit import ExecutionDocument, view_from_document
from runtime_core.dag import ExecutionView, StepError, StepView, failure_summary
from runtime_core.instances import RunIndexRecord
from runtime_core.lifecycle._listing import from_epoch_ms
from runtime_core.queueing import SharedRunRecord
from runtime_core.storage import RunRecord, RunRecordStep, RunRecordStepError


def _at(milliseconds: int | None) -> datetime | None:
    return from_epoch_ms(milliseconds) if milliseconds else None


def _steps(view: ExecutionView | None, failed: StepView | None) -> list[RunRecordStep]:
    if view is None:
        return []
    return [
        RunRecordStep(
            name=step.name,
            step_key=step.step_key,
            status=step.status,
            retry_count=step.retry_count,
            recovery_count=step.recovery_count,
            last_error=_error(step.last_error),
            failed_the_run=step is failed,
        )
        for step in view.steps
    ]


def _error(error: StepError | None) -> RunRecordStepError | None:
    if error is None:
        return None
    at = _at(error.at_ms)
    return RunRecordStepError(code=error.code, message=error.message, reason=error.reason, at=at)


def _sink_results(shared: SharedRunRecord, document: ExecutionDocument | None) -> dict[str, object]:
    """The stored results of the steps nothing depends on (what `run.status` shows as result)."""
    if document is None:
        return {}
    sinks = shared.pipeline.sink_step_names()
    return {s.name: s.result for s in document.steps if s.name in sinks and s.result is not None}


def run_record(
    shared: SharedRunRecord,
    *,
    queue_status: str | None,
    local: RunIndexRecord | None,
    document: ExecutionDocument | None,
    ended_at_ms: int,
) -> RunRecord:
    """The durable record of `shared`, which ended (through `local`, when it was dispatched)."""
    assert shared.snapshot is not None, "a shared run without a snapshot is never dispatched"
    execution_status = document.status if document else None
    view = view_from_document(document) if document else None
    failed = view.failed_step if view is not None and execution_status == "Failed" else None
    local_status = local.status.value if local else None
    return RunRecord(
        shared_run_id=shared.shared_run_id,
        tenant_id=shared.snapshot.tenant_id,
        local_run_id=local.local_run_id if local else None,
        execution_id=local.execution_id if local else None,
        pipeline_name=shared.pipeline.name,
        pipeline_version=shared.pipeline.version,
        submitted_by=shared.submitted_by,
        submit_mode=shared.submit_mode.value,
        status=execution_status or local_status or shared.status.value,
        shared_status=shared.status.value,
        queue_status=queue_status,
        local_status=local_status,
        execution_status=execution_status,
        control_status=document.control_status if document else None,
        failure_reason=failure_summary(failed)
        if failed
        else (local.failure_reason if local else None) or shared.failure_reason,
        assigned_runtime_instance_id=shared.assigned_runtime_instance_id,
        pump_runtime_instance_id=shared.pump_runtime_instance_id,
        pump_worker_id=shared.pump_worker_id,
        scale_out_request_id=shared.scale_out_request_id,
        snapshot=shared.snapshot.model_dump(mode="json"),
        steps=_steps(view, failed),
        result=_sink_results(shared, document),
        created_at=_at(shared.created_at_ms) or _at(ended_at_ms),
        dispatched_at=_at(shared.dispatched_at_ms),
        started_at=_at(local.started_at_ms) if local else None,
        ended_at=_at(ended_at_ms),
    )
