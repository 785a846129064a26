"""TaskService: long-running tool calls as tasks whose status is their run's status.

Owns creating a task for a run (`submit` follows its SharedRunId, `replay` its ExecutionId),
mapping the run to a task status (working; input_required when its execution waits for
human input, with the waiting key, prompt and the input schema of the waiting step;
completed; failed with the failing step's code and message; cancelled), pinning that status
in the task record (a terminal status never changes), cancelling a task's run, answering its
input request like `input.submit`, and listing a tenant's tasks. Every call is checked
against the task record's tenant: another tenant's task answers exactly like an unknown one.
Must not know any MCP wire format, nor run, queue or dispatch anything itself: the
ControlPlane and ExecutionControlService do.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from runtime_core.control import ControlStatus, ExecutionControlService
from runtime_core.control_plane import ControlPlane, RunStatusView, run_final_status, run_is_done
from runtime_core.dag import DagEngine
from runtime_core.errors import ConflictError, NotFoundError
from runtime_core.identity import ExecutionContextSnapshot, new_task_id
from runtime_core.tasks._errors import TaskNotFoundError, TaskTerminalError
from runtime_core.tasks._models import (
    InputRequest,
    TaskFailure,
    TaskPage,
    TaskRecord,
    TaskSettings,
    TaskStatus,
    TaskView,
)
from runtime_core.tasks._store import TaskStore, TransitionOutcome

log = logging.getLogger("runtime_core.tasks")

_FINAL_STATUS = {"Completed": TaskStatus.COMPLETED, "Cancelled": TaskStatus.CANCELLED}


class TaskService:
    def __init__(
        self,
        store: TaskStore,
        control_plane: ControlPlane,
        control: ExecutionControlService,
        engine: DagEngine,
        settings: TaskSettings | None = None,
    ) -> None:
        self.store = store
        self.control_plane = control_plane
        self.control = control
        self.engine = engine
        self.settings = settings or TaskSettings()

    async def create(
        self,
        tool: str,
        run_id: str,
        origin: dict[str, Any],
        snapshot: ExecutionContextSnapshot,
        *,
        requested_ttl_ms: int | None = None,
    ) -> TaskView:
        """A new task (status working) following `run_id`; stored before it is returned."""
        record = TaskRecord(
            task_id=new_task_id(),
            tenant_id=snapshot.tenant_id,
            user_id=snapshot.user_id,
            tool=tool,
            run_id=run_id,
            origin=origin,
            ttl_ms=self.settings.ttl_for(requested_ttl_ms),
            poll_interval_ms=self.settings.poll_interval_ms,
        )
        created = await self.store.create(record)
        if created is None:
            raise ConflictError(f"Task id '{record.task_id}' is taken.", hint="Call the tool again.")
        log.info(
            "task.created",
            extra={"task_id": created.task_id, "tool": tool, "run_id": run_id, "tenant_id": record.tenant_id},
        )
        return TaskView(
            record=created,
            status=TaskStatus.WORKING,
            last_updated_at_ms=created.last_updated_at_ms,
            status_message=f"{tool} accepted: following run '{run_id}'.",
        )

    async def get(self, task_id: str, snapshot: ExecutionContextSnapshot) -> TaskView:
        return await self._observe(await self._visible(task_id, snapshot), snapshot)

    async def list(self, snapshot: ExecutionContextSnapshot, cursor: str | None = None) -> TaskPage:
        """The caller tenant's tasks, newest first, one page at a time."""
        records, next_cursor = await self.store.page(snapshot.tenant_id, cursor, self.settings.page_size)
        views = []
        for record in records:
            try:
                views.append(await self._observe(record, snapshot))
            except TaskNotFoundError:
                continue  # expired while this page was read
        return TaskPage(tasks=views, next_cursor=next_cursor)

    async def cancel(self, task_id: str, snapshot: ExecutionContextSnapshot) -> TaskView:
        """Cancel the task's run, then pin the task cancelled; TaskTerminalError once terminal."""
        record = await self._visible(task_id, snapshot)
        current = await self._observe(record, snapshot)
        if current.status.is_terminal:
            raise TaskTerminalError(task_id, current.status)
        try:
            await self.control_plane.cancel(record.run_id, snapshot, reason=f"task {task_id} cancelled")
        except ConflictError:
            after = await self._observe(record, snapshot)
            if after.status.is_terminal:
                raise TaskTerminalError(task_id, after.status) from None
            raise
        await self.store.transition(task_id, TaskStatus.CANCELLED)
        log.info(
            "task.cancelled",
            extra={"task_id": task_id, "run_id": record.run_id, "tenant_id": record.tenant_id},
        )
        return await self._observe(record, snapshot)

    async def answer(
        self, task_id: str, answers: Mapping[str, dict[str, Any]], snapshot: ExecutionContextSnapshot
    ) -> TaskView:
        """Submit the answer given under the task's outstanding input key, like `input.submit`.

        Answers under any other key (never asked, already answered, superseded) are ignored.
        """
        record = await self._visible(task_id, snapshot)
        current = await self._observe(record, snapshot)
        request = current.input_request
        if request is None or request.key not in answers:
            return current
        try:
            await self.control.submit_input(request.execution_id, request.key, answers[request.key], snapshot)
        except ConflictError:
            return await self._observe(record, snapshot)  # answered meanwhile: nothing outstanding
        log.info(
            "task.input_answered",
            extra={"task_id": task_id, "execution_id": request.execution_id, "tenant_id": record.tenant_id},
        )
        return await self._observe(record, snapshot)

    async def _visible(self, task_id: str, snapshot: ExecutionContextSnapshot) -> TaskRecord:
        record = await self.store.load(task_id)
        if record is None or record.tenant_id != snapshot.tenant_id:
            raise TaskNotFoundError(task_id)
        return record

    async def _observe(self, record: TaskRecord, snapshot: ExecutionContextSnapshot) -> TaskView:
        """The status the run maps to now, pinned in the record (a terminal status wins)."""
        derived = await self._derive(record, snapshot)
        moved = await self.store.transition(record.task_id, derived.status)
        if moved.outcome is TransitionOutcome.MISSING:
            raise TaskNotFoundError(record.task_id)
        assert moved.status is not None and moved.last_updated_at_ms is not None
        if moved.status is derived.status:
            return derived.model_copy(update={"last_updated_at_ms": moved.last_updated_at_ms})
        return TaskView(  # pinned terminal (cancelled by request, or an earlier outcome)
            record=record,
            status=moved.status,
            last_updated_at_ms=moved.last_updated_at_ms,
            status_message=f"The task was {moved.status.value}.",
            run=derived.run,
        )

    async def _derive(self, record: TaskRecord, snapshot: ExecutionContextSnapshot) -> TaskView:
        try:
            run = await self.control_plane.run_status(record.run_id, snapshot)
        except NotFoundError:
            failure = TaskFailure(code="not_found", message=f"Run '{record.run_id}' is no longer visible.")
            return self._view(record, TaskStatus.FAILED, failure.message, failure=failure)
        if run_is_done(run):
            return await self._finished(record, run)
        if run.control_status == ControlStatus.WAITING_FOR_INPUT and run.execution_id:
            request = await self.input_request(run.execution_id, snapshot)
            if request is not None:
                message = f"Waiting for input under key '{request.key}': {request.prompt}".rstrip(": ")
                return self._view(record, TaskStatus.INPUT_REQUIRED, message, run=run, input_request=request)
        return self._view(record, TaskStatus.WORKING, _progress(run), run=run)

    async def _finished(self, record: TaskRecord, run: RunStatusView) -> TaskView:
        final = run_final_status(run) or "Failed"
        status = _FINAL_STATUS.get(final, TaskStatus.FAILED)
        if status is not TaskStatus.FAILED:
            return self._view(record, status, f"Run '{record.run_id}' is {final}.", run=run)
        failure = self._failure(run, final)
        message = f"[{failure.code}] {failure.message}"
        return self._view(record, status, message, run=run, failure=failure)

    @staticmethod
    def _failure(run: RunStatusView, final: str) -> TaskFailure:
        """The failing step's error (the run view names the step), else the run's failure reason."""
        step = run.failed_step_row
        if step is not None and step.last_error is not None:
            message = step.last_error.message or f"step '{step.name}' failed"
            return TaskFailure(
                code=step.last_error.code, message=f"step '{step.name}' failed: {message}", step=step.name
            )
        reason = run.failure_reason or f"run ended {final}"
        return TaskFailure(code=final.lower(), message=reason)

    async def input_request(
        self, execution_id: str, snapshot: ExecutionContextSnapshot
    ) -> InputRequest | None:
        """What an execution of the caller's tenant waits for: its waiting key, step, prompt and the
        step's input schema (None: not waiting). Tenant-checked by the control service."""
        state = await self.control.get(execution_id, snapshot)
        if state.status is not ControlStatus.WAITING_FOR_INPUT or not state.waiting_key:
            return None  # answered between the two reads
        return InputRequest(
            key=state.waiting_key,
            execution_id=execution_id,
            waiting_step=state.waiting_step,
            prompt=state.reason,
            input_schema=await self._input_schema(execution_id, state.waiting_step, state.waiting_key),
        )

    async def _input_schema(
        self, execution_id: str, step_name: str | None, waiting_key: str
    ) -> dict[str, Any]:
        """The input schema the waiting step's executor expects under `waiting_key`, else any object."""
        meta = await self.engine.store.load_meta(execution_id)
        step = next((s for s in meta.pipeline.steps if s.name == step_name), None) if meta else None
        return self.engine.executors.expected_input(step.step_key if step else "", waiting_key)

    @staticmethod
    def _view(record: TaskRecord, status: TaskStatus, message: str, **details: Any) -> TaskView:
        return TaskView(
            record=record,
            status=status,
            last_updated_at_ms=record.last_updated_at_ms,
            status_message=message,
            **details,
        )


_STATUS_OUTPUT_CHARS = 500
"""The tail of a streaming step's output a working task's status message carries."""


def _progress(run: RunStatusView) -> str:
    if not run.steps_total:
        return f"Run '{run.requested_id}' is {run.shared_status or run.local_status or 'queued'}."
    completed = run.step_counts.get("Completed", 0)
    state = run.control_status if run.control_status not in (None, "None", "Running") else "running"
    message = f"Run '{run.requested_id}' is {state}: {completed} of {run.steps_total} steps completed."
    streaming = next((step for step in run.steps if step.status == "Running" and step.output), None)
    if streaming is None or streaming.output is None:
        return message
    return f"{message} Step '{streaming.name}' so far: ...{streaming.output[-_STATUS_OUTPUT_CHARS:]}"
