"""Tools `submit`, `queue.drain`, `instances.list`, `run.status` and `cancel`: the control plane.

Owns resolving the pipeline argument (catalog name or inline definition), forwarding drain
progress to the MCP client, following a submitted run when the call carries a progress token
(`notifications.RunProgress`; not when the call becomes a task), and shaping ControlPlane
answers into tool answers (`done` is the control plane's terminal rule, `run_is_done`). Must
not queue, dispatch or look runs up itself: the ControlPlane does, tenant-checked against the
runs' stored snapshots.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcp.server.mcpserver import Context

from mcp_runtime._capacity_outputs import InstancesListOutput, RuntimeInstanceInfo
from mcp_runtime._inputs import (
    CancelInput,
    DrainInput,
    InstancesListInput,
    PipelineRunInput,
    RunStatusInput,
    SubmitInput,
)
from mcp_runtime._outputs import CancelOutput, DrainOutput, RunStatusOutput, SubmitOutput
from mcp_runtime._registration import ToolCall, ToolSpec
from mcp_runtime._run_answers import run_status_output
from mcp_runtime.notifications import RunProgress
from mcp_runtime.tasks import answered_as_task
from runtime_core.agents import inline_catalog_pipelines
from runtime_core.control_plane import ControlPlane, InstanceView, StepPage
from runtime_core.errors import NotFoundError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineCatalog, PipelineDefinition, parse_pipeline
from runtime_core.queueing import SubmitMode, SubmitResult


def _next_step(result: SubmitResult) -> str:
    run_id = result.shared_run_id
    if result.status.value == "QueuedGlobally":
        return f"Call queue.drain (or wait for the background pump), then run.status with run_id '{run_id}'."
    if result.status.value == "Rejected":
        return "Admission rejected the run: read `reason`; fix the cause and submit again."
    if result.status.value == "Cancelled":
        return "The run was cancelled at submit: read `reason` (its concurrency key had no free slot)."
    return f"Poll run.status with run_id '{run_id}' until done is true."


def _from_ms(milliseconds: int) -> datetime:
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)


def instance_info(view: InstanceView) -> RuntimeInstanceInfo:
    return RuntimeInstanceInfo(
        runtime_instance_id=view.runtime_instance_id,
        role=view.role,
        status=view.status,
        live=view.live,
        worker_count=view.worker_count,
        active_worker_count=view.active_workers,
        available_worker_count=view.available_workers,
        max_local_workers_per_execution=view.max_local_workers_per_execution,
        queued_run_count=view.queued,
        running_run_count=view.running,
        active_run_count=view.active_runs,
        queue_capacity=view.queue_capacity,
        max_concurrent_runs=view.max_concurrent_runs,
        available_run_slots=view.available_run_slots,
        reserved_run_slots=view.reserved_run_slots,
        is_queue_paused=view.queue_paused,
        can_accept_run=view.can_accept_run,
        registered_at=_from_ms(view.registered_at_ms),
        last_heartbeat_at=_from_ms(view.last_heartbeat_at_ms),
        tenant_id=view.tenant_id,
        tenant_group_id=view.tenant_group_id,
        isolation_mode=view.isolation_mode.value,
        prefer_dedicated_capacity=view.prefer_dedicated_capacity,
        allow_shared_fallback=view.allow_shared_fallback,
        runtime_instance_id_prefix=view.runtime_instance_id_prefix,
        provider_name=view.provider_name,
        transport_name=view.transport_name,
        provider_endpoint=view.provider_endpoint,
        assistance_worker_count=view.assistance_workers,
        assisting_execution_count=view.assisting_executions,
        assisting_worker_count=view.assisting_workers,
    )


def resolve_pipeline(catalog: PipelineCatalog, request: PipelineRunInput) -> PipelineDefinition:
    """The catalog pipeline the request names, or its inline definition (validated by parsing),
    with the catalog pipelines its agents' tools name put in their place."""
    if request.pipeline is not None:
        pipeline = catalog.get(request.pipeline)
    else:
        assert request.definition is not None
        pipeline = parse_pipeline(request.definition)
    return inline_catalog_pipelines(pipeline, catalog.get)


def _wants_progress(ctx: Context) -> bool:
    """The call carries a progress token and is answered by the tool itself (not as a task)."""
    meta = ctx.request_context.meta or {}
    return meta.get("progress_token") is not None and not answered_as_task(ctx.request_context)


class RunTools:
    def __init__(
        self, control_plane: ControlPlane, catalog: PipelineCatalog, progress: RunProgress | None = None
    ) -> None:
        self._control_plane = control_plane
        self._catalog = catalog
        self._progress = progress

    async def submit(self, request: SubmitInput, call: ToolCall) -> SubmitOutput:
        pipeline = self._pipeline(request)
        result = await self._control_plane.submit(
            pipeline,
            request.input,
            SubmitMode(request.mode),
            call.snapshot,
            idempotency_key=request.idempotency_key,
            callback_url=request.callback_url,
            priority=request.priority,
            concurrency=request.concurrency,
        )
        answer = self._submit_output(result, pipeline, call)
        if self._progress is None or not _wants_progress(call.ctx):
            return answer
        view = await self._progress.follow(result.shared_run_id, call.snapshot, call.ctx.report_progress)
        return answer.model_copy(update={"run": run_status_output(view) if view else None})

    @staticmethod
    def _submit_output(result: SubmitResult, pipeline: PipelineDefinition, call: ToolCall) -> SubmitOutput:
        return SubmitOutput(
            shared_run_id=result.shared_run_id,
            status=result.status.value,
            mode=result.submit_mode.value,
            pipeline=pipeline.name,
            tenant_id=call.snapshot.tenant_id,
            admission_decision=result.admission_decision,
            reason=result.reason,
            assigned_runtime_instance_id=result.assigned_runtime_instance_id,
            local_run_id=result.local_run_id,
            scale_out_request_id=result.scale_out_request_id,
            next_step=_next_step(result),
            deduplicated=result.deduplicated,
        )

    def _pipeline(self, request: SubmitInput) -> PipelineDefinition:
        return resolve_pipeline(self._catalog, request)

    async def drain(self, request: DrainInput, call: ToolCall) -> DrainOutput:
        async def progress(done: int, total: int, message: str) -> None:
            await call.ctx.report_progress(done, total, message)

        result = await self._control_plane.drain(
            request.max_count, call.snapshot, progress, stop_on_failure=request.stop_on_failure
        )
        return DrainOutput.model_validate(result.model_dump())

    async def instances(self, request: InstancesListInput, call: ToolCall) -> InstancesListOutput:
        views = await self._control_plane.list_instances(call.snapshot)
        infos = [instance_info(view) for view in views if view.can_accept_run or not request.only_accepting]
        return InstancesListOutput(tenant_id=call.snapshot.tenant_id, instances=infos)

    async def status(self, request: RunStatusInput, call: ToolCall) -> RunStatusOutput:
        page = StepPage.at(request.steps_cursor, request.steps_page_size)
        view = await self._control_plane.run_status(request.run_id, call.snapshot, page)
        return run_status_output(view, include_steps=request.include_steps)

    async def cancel(self, request: CancelInput, call: ToolCall) -> CancelOutput:
        result = await self._control_plane.cancel(request.run_id, call.snapshot)
        return CancelOutput.model_validate(result.model_dump())

    async def execution_id_for(self, run_id: str, snapshot: ExecutionContextSnapshot) -> str:
        """The ExecutionId behind any run id of the caller's tenant (not found before dispatch)."""
        view = await self._control_plane.run_status(run_id, snapshot)
        if view.execution_id is None:
            raise NotFoundError(
                f"Run '{run_id}' has no execution yet (shared status {view.shared_status}).",
                hint="Drain the queue with queue.drain, then retry once run.status shows an execution_id.",
            )
        return view.execution_id

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="submit",
                title="Submit a pipeline run",
                description=(
                    "Submit a run of a pipeline: a catalog name (`pipeline`, see pipelines.list) or an "
                    "inline definition (`definition`), with its initial state (`input`). The run is "
                    "stamped with your tenant and identity. QueueFirst (default) queues it globally "
                    "(status QueuedGlobally; no LocalRunId or ExecutionId yet) until queue.drain or the "
                    "background pump dispatches it; DirectDispatch admits it now. Returns the "
                    "shared_run_id to follow with run.status (or the resource run://<shared_run_id>). An "
                    "invalid pipeline is refused with the broken rule and nothing is queued. Pass an "
                    "idempotency_key to make a retried submit safe, a callback_url for a signed webhook "
                    "when the run ends. With a progress token, submit reports progress as steps finish "
                    "and answers once the run is done or waits for input."
                ),
                input_model=SubmitInput,
                output_model=SubmitOutput,
                handler=self.submit,
                read_only=False,
            ),
            ToolSpec(
                name="queue.drain",
                title="Drain the shared queue",
                description=(
                    "Manually dispatch up to `max_count` queued runs: each is claimed, its own tenant "
                    "snapshot restored, admitted to a tenant-visible runtime instance with capacity, and "
                    "delivered to that instance's local queue. Reports progress per attempt. Runs with no "
                    "capacity stay queued. Counts, progress and the list cover only your tenant's runs."
                ),
                input_model=DrainInput,
                output_model=DrainOutput,
                handler=self.drain,
                read_only=False,
            ),
            ToolSpec(
                name="instances.list",
                title="List runtime instances",
                description=(
                    "The runtime instances visible to your tenant with their capacity: workers (total, "
                    "active, available, max per execution), queued / running / active runs, run slots, "
                    "queue paused, can_accept_run, heartbeat, tenant ownership (isolation mode, shared "
                    "fallback) and provider. A dashboard of where runs can go."
                ),
                input_model=InstancesListInput,
                output_model=InstancesListOutput,
                handler=self.instances,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                name="run.status",
                title="Run status",
                description=(
                    "Everything about one run of your tenant, by SharedRunId (srun_), LocalRunId (lrun_) "
                    "or ExecutionId (exec_): shared / queue / local / execution / control statuses, the "
                    "assigned runtime instance, the step table and, once finished, the result. Poll it "
                    "until done=true. Ids of other tenants answer not found."
                ),
                input_model=RunStatusInput,
                output_model=RunStatusOutput,
                handler=self.status,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                name="cancel",
                title="Cancel a run",
                description=(
                    "Cancel a run by any of its ids. Still queued globally: cancelled before dispatch (no "
                    "LocalRunId or ExecutionId is ever created). Queued locally: removed from the "
                    "instance's queue. Running: its execution is cancelled (running steps finish, nothing "
                    "new starts, final status Cancelled). Finished runs answer a conflict."
                ),
                input_model=CancelInput,
                output_model=CancelOutput,
                handler=self.cancel,
                read_only=False,
                destructive=True,
            ),
        ]
