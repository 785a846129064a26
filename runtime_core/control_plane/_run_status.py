"""RunStatusReader: the tenant-checked `run.status` view of a shared, local or execution id.

Owns assembling one RunStatusView from the shared run record and its queue item, the owning
instance's local run (or its index record when the instance is gone) and the execution's
hot state (its summary: step counts per status, read in one round trip whatever its size;
one page of steps with their last errors and next retries, live output and agent sub-steps,
control status, the input a waiting run expects, the step that failed a failed run, sink
results, the instances that assisted it), marking an older local attempt than the one the
shared run is dispatched to (so it is not `done`); or, for a finished run
whose hot state was retired (also when that happens while it is being read), from its durable
RunRecord, so the answer is the same before and after the cleanup. Must not change any state.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runtime_core.assistance import ASSISTANCE_FIELD, assistant_records
from runtime_core.control_plane._live_steps import fill_live_steps
from runtime_core.control_plane._parts import ControlPlaneParts
from runtime_core.control_plane._run_access import LocatedRun, RunLocator
from runtime_core.control_plane._step_rows import explain_execution, page_archived_steps
from runtime_core.control_plane._views import (
    TERMINAL_RUN_STATUSES,
    AssistantView,
    RunStatusView,
    StepPage,
    StepRow,
)
from runtime_core.dag import ExecutionPages
from runtime_core.errors import RuntimeCoreError, StoreUnavailableError
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.instances import LocalRunView, RunIndexRecord
from runtime_core.providers import RunRef
from runtime_core.queueing import SharedRunStatus
from runtime_core.storage import RunRecord


def _superseded(located: LocatedRun) -> bool:
    """The local run shown is not the one its shared run is dispatched to (an older attempt)."""
    shared, local = located.shared, located.local
    if shared is None or local is None or shared.status is not SharedRunStatus.DISPATCHED:
        return False
    return shared.local_run_id is not None and shared.local_run_id != local.local_run_id


class RunStatusReader:
    def __init__(self, parts: ControlPlaneParts, locator: RunLocator) -> None:
        self.parts = parts
        self.locator = locator
        self.pages = ExecutionPages(parts.dag_store)

    async def read(
        self, any_id: str, caller: ExecutionContextSnapshot, page: StepPage | None = None
    ) -> RunStatusView:
        """The run's view with the steps of `page` (default: the first page)."""
        page = page or StepPage()
        located = await self.locator.locate(any_id, caller)
        if located.archived is not None:
            return await self._archived_view(any_id, located.archived, located.snapshot, page)
        with restored_snapshot(located.snapshot):
            view = RunStatusView(
                requested_id=any_id,
                tenant_id=located.snapshot.tenant_id,
                parent_call=located.snapshot.parent_call,
            )
            await self._fill_shared(view, located)
            if located.local is not None:
                self._fill_local(view, await self._local_view(located.local))
                if _superseded(located):
                    view.mark_attempt_superseded()
            if located.execution_id and not await self._fill_execution(
                view, located.execution_id, located.snapshot, page
            ):
                # The execution's keys went after this run was located: it was archived meanwhile.
                archived = await self.locator.archived(located.execution_id, caller)
                if archived is not None:
                    return await self._archived_view(any_id, archived, located.snapshot, page)
        return view

    async def _archived_view(
        self, any_id: str, record: RunRecord, snapshot: ExecutionContextSnapshot, page: StepPage
    ) -> RunStatusView:
        with restored_snapshot(snapshot):
            view = RunStatusView(
                requested_id=any_id,
                tenant_id=record.tenant_id,
                **record.model_dump(
                    include={
                        "shared_run_id",
                        "local_run_id",
                        "execution_id",
                        "shared_status",
                        "queue_status",
                        "submit_mode",
                        "assigned_runtime_instance_id",
                        "pump_runtime_instance_id",
                        "pump_worker_id",
                        "scale_out_request_id",
                        "local_status",
                        "execution_status",
                        "control_status",
                        "failure_reason",
                    }
                ),
                failed_step=next((step.name for step in record.steps if step.failed_the_run), None),
                parent_call=snapshot.parent_call,
                submitted_at=record.created_at,
                started_at=record.started_at,
                ended_at=record.ended_at,
            )
            rows = [StepRow.model_validate(step.model_dump()) for step in record.steps]
            page_archived_steps(view, rows, page)
            if record.result and record.execution_id:
                view.result = await self._decoded(record.execution_id, record.result, snapshot)
            if record.execution_id and self.parts.durable is not None:
                terminal = await self.parts.durable.get_snapshot(record.execution_id, record.tenant_id)
                if terminal is not None:
                    view.assistants = _assistants(terminal.snapshot.get("attributes", {}), None)
        return view

    async def _fill_shared(self, view: RunStatusView, located: LocatedRun) -> None:
        shared = located.shared
        if shared is None:
            return
        item = await self.parts.queue.item(shared.shared_run_id)
        view.shared_run_id = shared.shared_run_id
        view.shared_status = shared.status.value
        view.queue_status = item.status.value if item else None
        view.submit_mode = shared.submit_mode.value
        view.assigned_runtime_instance_id = shared.assigned_runtime_instance_id
        view.pump_runtime_instance_id = shared.pump_runtime_instance_id
        view.pump_worker_id = shared.pump_worker_id
        view.scale_out_request_id = shared.scale_out_request_id
        view.failure_reason = shared.failure_reason
        view.submitted_at = _utc(shared.created_at_ms) if shared.created_at_ms else None
        if shared.status.value in TERMINAL_RUN_STATUSES and shared.updated_at_ms:
            view.ended_at = _utc(shared.updated_at_ms)  # ended before any dispatch (cancelled, rejected)

    @staticmethod
    def _fill_local(view: RunStatusView, local: LocalRunView) -> None:
        view.local_run_id = local.local_run_id
        view.shared_run_id = view.shared_run_id or local.shared_run_id
        view.local_status = local.status.value
        view.effective_workers = local.effective_workers or None
        view.execution_id = local.execution_id
        view.failure_reason = local.failure_reason or view.failure_reason
        view.submitted_at = view.submitted_at or (_utc(local.created_at_ms) if local.created_at_ms else None)
        view.started_at = _utc(local.started_at_ms) if local.started_at_ms else None
        view.ended_at = _utc(local.completed_at_ms) if local.completed_at_ms else None

    async def _local_view(self, record: RunIndexRecord) -> LocalRunView:
        """Ask the owning instance (index already checked the tenant); fall back to the index."""
        try:
            descriptor = await self.parts.registry.descriptor(record.runtime_instance_id)
            provider = self.parts.providers.for_instance(descriptor)
            return await provider.run_status(
                RunRef(runtime_instance_id=record.runtime_instance_id, local_run_id=record.local_run_id)
            )
        except StoreUnavailableError:
            raise
        except RuntimeCoreError:
            pass  # instance unregistered or unreachable: the index record is the answer
        return LocalRunView(
            local_run_id=record.local_run_id,
            shared_run_id=record.shared_run_id,
            runtime_instance_id=record.runtime_instance_id,
            status=record.status,
            execution_id=record.execution_id,
            failure_reason=record.failure_reason,
            created_at_ms=record.created_at_ms,
            started_at_ms=record.started_at_ms,
            completed_at_ms=record.completed_at_ms,
        )

    async def _fill_execution(
        self, view: RunStatusView, execution_id: str, snapshot: ExecutionContextSnapshot, page: StepPage
    ) -> bool:
        """False when the execution has no hot state."""
        # The counts walk every step's status: a run's first page carries them, later pages
        # (a client walking the steps) do not, so walking a run's pages stays linear.
        summary = await self.pages.summary(execution_id, counts=page.cursor == 0)
        view.execution_id = execution_id
        if summary is None:
            return False
        meta = summary.meta
        view.execution_status = meta.status
        view.control_status = summary.control_status
        if meta.attributes.get(ASSISTANCE_FIELD):
            now_ms = await self.parts.hot_state.server_time_ms() if meta.status == "Running" else None
            view.assistants = _assistants(meta.attributes, now_ms)
        rows = await self.pages.steps(meta, page.names(meta.pipeline.steps))
        explain_execution(view, summary, rows, page, self.parts.engine.executors)
        await fill_live_steps(view, self.parts.dag_store, execution_id)
        if meta.status != "Running":
            sinks = await self.pages.results(execution_id, sorted(meta.pipeline.sink_step_names()))
            view.result = await self._decoded(execution_id, sinks, snapshot)
        return True

    async def _decoded(
        self, execution_id: str, sinks: dict[str, Any], snapshot: ExecutionContextSnapshot
    ) -> Any:
        """The sink results as values (payload references resolved); one sink gives its value alone."""
        decoded = await self.parts.engine.results.decode(execution_id, sinks, snapshot)
        return next(iter(decoded.values())) if len(decoded) == 1 else decoded


def _assistants(attributes: dict[str, Any], now_ms: int | None) -> list[AssistantView]:
    """The instances an execution records as its assistants; `now_ms` None: it finished (none
    is active)."""
    return [
        AssistantView(
            runtime_instance_id=r.runtime_instance_id,
            effective_workers=r.workers,
            active=now_ms is not None and r.active(now_ms),
            joined_at=_utc(r.joined_at_ms),
            left_at=_utc(r.left_at_ms) if r.left_at_ms is not None else None,
            left_reason=r.left_reason,
            steps_completed=r.steps_completed,
        )
        for r in assistant_records(attributes)
    ]


def _utc(milliseconds: int) -> datetime:
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
