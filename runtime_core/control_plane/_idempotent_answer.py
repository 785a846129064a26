"""The answer to an idempotent submit whose run already left hot state.

Owns turning the durable view of the run an idempotency key made (its RunRecord, through the
run.status reader) into that submit's answer, once the lifecycle retired the run's hot
record within the key's window. Must not submit anything.
"""

from __future__ import annotations

from runtime_core.control_plane._views import RunStatusView
from runtime_core.queueing import IdempotentRunGoneError, SharedRunStatus, SubmitMode, SubmitResult


def archived_submit_result(gone: IdempotentRunGoneError, view: RunStatusView) -> SubmitResult:
    """The key's run as its durable record tells it (`deduplicated`: nothing was submitted)."""
    if view.shared_status is None or view.submit_mode is None:
        raise gone
    return SubmitResult(
        shared_run_id=gone.shared_run_id,
        status=SharedRunStatus(view.shared_status),
        submit_mode=SubmitMode(view.submit_mode),
        reason=f"idempotency key '{gone.key}' already submitted this finished run; nothing new submitted",
        assigned_runtime_instance_id=view.assigned_runtime_instance_id,
        local_run_id=view.local_run_id,
        scale_out_request_id=view.scale_out_request_id,
        deduplicated=True,
    )
