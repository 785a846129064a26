"""Pydantic input models of the MCP tools: one per tool, the published argument schema.

Owns field names, types, limits and descriptions (an assistant reads them to call a tool).
Defaults are plain values (never factories): the tool registration turns each field into
one flat tool argument. Must not contain behaviour beyond argument validation.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime_core.control_plane import DEFAULT_STEP_PAGE_SIZE, MAX_STEP_PAGE_SIZE
from runtime_core.flow import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY, ConcurrencyKey
from runtime_core.queueing import MAX_IDEMPOTENCY_KEY_LENGTH
from runtime_core.webhooks import MAX_CALLBACK_URL_LENGTH

SubmitMode = Literal["QueueFirst", "DirectDispatch"]

RUN_ID_DESCRIPTION = (
    "Any run identifier returned by `submit` or `run.status`: a SharedRunId (srun_...), "
    "a LocalRunId (lrun_...) or an ExecutionId (exec_...)."
)
EXECUTION_ID_DESCRIPTION = "The ExecutionId (exec_...) of the DAG, as shown by `run.status`."
MAX_ID_LENGTH = 200
ID_PATTERN = r"^[!-~]+$"
"""Ids are printable ASCII without spaces: anything else cannot name a run, instance or key."""
NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"
"""Names and keys chosen by users: any text without control characters."""


class ToolInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PipelineRunInput(ToolInput):
    """A pipeline (catalog name or inline definition) and its input: what a run executes."""

    pipeline: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=NAME_PATTERN,
        description="Name of a catalog pipeline (see `pipelines.list`), e.g. 'rag-final-test'. "
        "Give either this or `definition`.",
    )
    definition: dict[str, Any] | None = Field(
        None,
        description="An inline pipeline definition (the JSON object format of examples/pipelines). "
        "Give either this or `pipeline`.",
    )
    input: dict[str, Any] = Field(
        {},
        description="Initial execution state, read by step bindings such as 'state.candidateId'. "
        'Example for rag-final-test: {"candidateId": "c-1", "jobId": "j-1"}.',
    )

    @model_validator(mode="after")
    def _one_pipeline_source(self) -> PipelineRunInput:
        if (self.pipeline is None) == (self.definition is None):
            raise ValueError(
                "give exactly one of 'pipeline' (a catalog name) or 'definition' (an inline pipeline)"
            )
        return self


class SubmitInput(PipelineRunInput):
    mode: SubmitMode = Field(
        "QueueFirst",
        description="QueueFirst (default): queue globally; the run starts when the queue is drained "
        "(`queue.drain`, or the background pump). DirectDispatch: admit and dispatch now when "
        "tenant-visible capacity can accept it, otherwise queue, request scale-out or reject.",
    )
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_IDEMPOTENCY_KEY_LENGTH,
        pattern=NAME_PATTERN,
        description="Makes a retried submit safe: the same key from your tenant within the idempotency "
        "window (24 h by default) returns the run it first created (deduplicated=true) instead of "
        "submitting again; the same key with a different pipeline or input is an idempotency_conflict. "
        "Use a fresh random value (e.g. a UUID) per intended run.",
    )
    callback_url: str | None = Field(
        None,
        max_length=MAX_CALLBACK_URL_LENGTH,
        description="A webhook for this run: an http(s) URL on a host your tenant allow-lists "
        "(webhooks.callbackHosts) receives a signed JSON event when the run completes, fails, is "
        "cancelled or waits for input.",
    )
    priority: int | None = Field(
        None,
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
        description=f"{MIN_PRIORITY} (lowest) to {MAX_PRIORITY} (highest), default {DEFAULT_PRIORITY}: "
        "among your tenant's queued runs, a higher priority is dispatched first (oldest first among "
        "equals). It never takes turns from other tenants (see docs/flow-control.md).",
    )
    concurrency: ConcurrencyKey | None = Field(
        None,
        description='At most `limit` active runs per value of `key`, e.g. {"key": "input.customerId", '
        '"limit": 1, "strategy": "queue"}; strategy queue (wait in line), cancel-newest (cancel this '
        "run when the key is full), cancel-in-progress (cancel the key's oldest runs: the newest win) "
        "or round-robin (wait; waiting keys take turns). Overrides the pipeline's config.flow.concurrency.",
    )


class DrainInput(ToolInput):
    max_count: int = Field(
        10, ge=1, le=1000, description="Dispatch at most this many queued runs in this call (1-1000)."
    )
    stop_on_failure: bool = Field(
        False, description="Stop at the first dispatch failure instead of continuing with the next run."
    )


class InstancesListInput(ToolInput):
    only_accepting: bool = Field(
        False, description="List only instances that can accept a new run right now (can_accept_run)."
    )


class RunIdInput(ToolInput):
    run_id: str = Field(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN, description=RUN_ID_DESCRIPTION
    )


class RunStatusInput(RunIdInput):
    include_steps: bool = Field(
        True, description="Include a page of the step table (status, retries, errors)."
    )
    steps_cursor: str | None = Field(
        None,
        max_length=16,
        description="Which page of the step table: the next_steps_cursor of the previous answer (none: "
        "the first page). The step counts cover the whole run whatever the page.",
    )
    steps_page_size: int = Field(
        DEFAULT_STEP_PAGE_SIZE, ge=1, le=MAX_STEP_PAGE_SIZE, description="Steps per page of the step table."
    )


class CancelInput(RunIdInput):
    pass


class ExecutionInput(ToolInput):
    execution_id: str = Field(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN, description=EXECUTION_ID_DESCRIPTION
    )


class PauseInput(ExecutionInput):
    pass


class ResumeInput(ExecutionInput):
    pass


class InputSubmitInput(ExecutionInput):
    waiting_key: str = Field(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=NAME_PATTERN,
        description="The waiting key the execution is parked on (shown by `run.status` as waiting_key), "
        "e.g. 'hire-approval'.",
    )
    payload: dict[str, Any] = Field(
        {}, description='The human input, e.g. {"approved": true, "comment": "ok"}.'
    )


class ReplayInput(ExecutionInput):
    pass


class LedgerInput(RunIdInput):
    limit: int = Field(500, ge=1, le=5000, description="Return at most this many entries, oldest first.")


class TraceInput(RunIdInput):
    pass


class ForensicsInput(ToolInput):
    execution_id: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description="Only recovery records about this ExecutionId.",
    )
    runtime_instance_id: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description="Only recovery records written for this (lost) runtime instance (rt_...).",
    )


class PipelinesListInput(ToolInput):
    pass


class CapacityListInput(ToolInput):
    pass


class StepsListInput(ToolInput):
    step_key: str | None = Field(
        None,
        max_length=200,
        pattern=r"^[A-Za-z][A-Za-z0-9_.:-]*$",
        description="Only this step type (e.g. 'rag.retrieval'); omit for all of them.",
    )


class PipelinesValidateInput(ToolInput):
    definition: dict[str, Any] | None = Field(
        None, description="The pipeline definition to check, as a JSON object. Give this or `pipeline`."
    )
    pipeline: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=NAME_PATTERN,
        description="Name of a catalog pipeline to re-check.",
    )

    @model_validator(mode="after")
    def _one_pipeline_source(self) -> PipelinesValidateInput:
        if (self.pipeline is None) == (self.definition is None):
            raise ValueError("give exactly one of 'definition' (a pipeline object) or 'pipeline' (a name)")
        return self


SharedStatus = Literal[
    "Submitted", "QueuedGlobally", "Dispatched", "ScaleOutRequested", "Rejected", "Cancelled", "Failed"
]


class RunsListInput(ToolInput):
    shared_status: SharedStatus | None = Field(
        None, description="Only runs whose shared (control-plane) status is this, e.g. Cancelled."
    )
    status: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=NAME_PATTERN,
        description="Only runs whose overall status (the most advanced of execution, local and shared "
        "statuses) is this, e.g. Completed, Failed, Running, WaitingForInput, Paused, QueuedGlobally.",
    )
    pipeline: str | None = Field(
        None, max_length=MAX_ID_LENGTH, pattern=NAME_PATTERN, description="Only runs of this pipeline name."
    )
    submitted_by: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=NAME_PATTERN,
        description="Only runs submitted by this user id.",
    )
    submitted_after: datetime | None = Field(
        None, description="Only runs submitted at or after this time (ISO 8601; UTC when no offset is given)."
    )
    submitted_before: datetime | None = Field(
        None, description="Only runs submitted before this time (ISO 8601; UTC when no offset is given)."
    )
    limit: int = Field(20, ge=1, le=200, description="Return at most this many runs (1-200), newest first.")
    cursor: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description="`next_cursor` of the previous page, to continue with older runs.",
    )
    prev_cursor: str | None = Field(
        None,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description="`prev_cursor` of a page, to go back to newer runs (not with `cursor`).",
    )
