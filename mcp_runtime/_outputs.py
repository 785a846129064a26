"""Pydantic output models of the MCP tools: the structured answers clients rely on.

Owns the published output schemas (snapshot-tested in tests/unit/mcp_tool_schemas.json:
change them deliberately). Must not contain behaviour; `_shaping` fills them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ANY_JSON_VALUE: dict[str, Any] = {
    "anyOf": [{"type": kind} for kind in ("object", "array", "string", "number", "boolean", "null")]
}
"""The schema of a field that holds any JSON value, spelled with one `type` per branch (strict
schema checkers such as the MCP Inspector's `--strict` want a type on every field)."""


class ToolOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubmitOutput(ToolOutput):
    shared_run_id: str = Field(description="The SharedRunId: use it with run.status, cancel, ledger, trace.")
    status: str = Field(
        description="Shared run status: QueuedGlobally, Dispatched, ScaleOutRequested, Rejected, or "
        "Cancelled (its concurrency key was full, strategy cancel-newest)."
    )
    mode: str = Field(description="The submit mode used: QueueFirst or DirectDispatch.")
    pipeline: str
    tenant_id: str
    admission_decision: str | None = Field(None, description="DirectDispatch only: what admission decided.")
    reason: str = ""
    assigned_runtime_instance_id: str | None = None
    local_run_id: str | None = None
    scale_out_request_id: str | None = None
    next_step: str = Field(description="What to call next.")
    deduplicated: bool = Field(
        False,
        description="True when idempotency_key had already submitted this run: nothing new was submitted.",
    )
    run: RunStatusOutput | None = Field(
        None,
        description="The run's `run.status` answer once it settled: in the result of an MCP task (the "
        "call ran as a task), or when the call carried a progress token (submit then reports progress "
        "and answers once the run is done or waits for input).",
    )


class DrainedRun(ToolOutput):
    shared_run_id: str
    outcome: str = Field(description="Dispatched, NoCapacity or DispatchFailed.")
    assigned_runtime_instance_id: str | None = None
    local_run_id: str | None = None
    reason: str = ""


class DrainOutput(ToolOutput):
    attempted: int
    dispatched: int
    failed: int
    no_capacity: int
    stop_reason: str = Field(
        description="Why the drain stopped: QueueEmpty, MaxDispatchCount, NoCapacity, DispatchFailed "
        "or Cancelled."
    )
    pending_after: int = Field(description="Runs of your tenant still queued after this drain.")
    runs: list[DrainedRun] = Field(description="Your tenant's runs handled by this drain.")


class StepError(ToolOutput):
    code: str = Field(description="Failure code: transient, timeout, permanent, not_found, exception, ...")
    message: str
    reason: str = Field("", description="What the retry policy decided and why.")
    at: datetime | None = Field(None, description="When the step failed (server time).")


class StepRow(ToolOutput):
    name: str
    step_key: str
    status: str = Field(description="Pending, Ready, Running, WaitingForRetry, Completed or Failed.")
    retry_count: int = Field(description="Retries used so far.")
    recovery_count: int = Field(description="Times the step was taken back from a dead worker.")
    last_error: StepError | None = Field(
        None, description="The step's last failure (kept after a later successful retry)."
    )
    next_retry_at: datetime | None = Field(None, description="While WaitingForRetry: when it runs again.")
    started_at: datetime | None = Field(None, description="While Running: when its current attempt began.")
    output: str | None = Field(
        None, description="While a streaming step (stream: true) runs: its text so far (the last 16 KiB)."
    )
    output_length: int | None = Field(None, description="Characters a streaming step wrote so far.")
    agent: list[dict[str, Any]] | None = Field(
        None,
        description="An ai.agent step's transcript: its sub-steps (model turns and tool calls) in order, "
        "each with kind, state, attempts, times, input, output, usage and any approval or error.",
    )


class WaitingInput(ToolOutput):
    key: str = Field(description="The waiting key: pass it to input.submit.")
    step: str | None = Field(None, description="The step that asked for input.")
    prompt: str = Field("", description="What the step asks.")
    expected_input: dict[str, Any] = Field(
        description="JSON Schema of the payload input.submit should carry for this step."
    )
    since: datetime | None = Field(None, description="When the run began waiting (server time).")


class RunAssistant(ToolOutput):
    runtime_instance_id: str = Field(description="A runtime instance whose idle workers assisted the run.")
    effective_workers: int = Field(description="The workers it brought (its effective count).")
    active: bool = Field(description="Assisting now (it has not left and its assistance lease holds).")
    joined_at: datetime
    left_at: datetime | None = Field(None, description="When it left (none: still there, or it died).")
    left_reason: str | None = None
    steps_completed: int = Field(0, description="Steps it completed, counted when it left.")


class RunStatusOutput(ToolOutput):
    requested_id: str
    tenant_id: str
    done: bool = Field(description="True once the run reached a terminal status (see the statuses).")
    shared_run_id: str | None = None
    local_run_id: str | None = None
    execution_id: str | None = None
    shared_status: str | None = Field(None, description="Control-plane status of the shared run.")
    queue_status: str | None = Field(None, description="Status of the shared queue item.")
    submit_mode: str | None = None
    assigned_runtime_instance_id: str | None = None
    pump_runtime_instance_id: str | None = None
    pump_worker_id: str | None = None
    scale_out_request_id: str | None = None
    local_status: str | None = Field(None, description="Queued, Running, Completed, Failed or Cancelled.")
    effective_workers: int | None = Field(
        None,
        description="Engine workers of the run once started: at most this many of its steps run at "
        "once, each on one of the instance's workers while it runs.",
    )
    execution_status: str | None = Field(
        None, description="DAG status: Running, Completed, Failed, Cancelled."
    )
    control_status: str | None = Field(
        None, description="Execution control: Paused, WaitingForInput (answer with input.submit), ..."
    )
    waiting_key: str | None = Field(
        None, description="While control_status is WaitingForInput: the key to answer with input.submit."
    )
    waiting_input: WaitingInput | None = Field(
        None,
        description="While control_status is WaitingForInput: the key, the step, its prompt and the "
        "input it expects.",
    )
    failure_reason: str | None = Field(
        None, description="Why the run failed or was rejected; for a failed step: its name, code and message."
    )
    failed_step: str | None = Field(None, description="The step whose failure failed the run.")
    parent_call: str | None = Field(
        None,
        description="A child run of an agent's pipeline tool: the call that started it, "
        "<ExecutionId>:<step>:<sub-step> of the parent agent.",
    )
    submitted_at: datetime | None = Field(None, description="When the run was submitted.")
    started_at: datetime | None = Field(
        None, description="When its latest local run started executing (none while queued)."
    )
    ended_at: datetime | None = Field(None, description="When it finished (none while unfinished).")
    assistants: list[RunAssistant] = Field(
        default_factory=list,
        description="Runtime instances of other processes that assisted this wide run (execution "
        "assistance), with the workers each brought; `effective_workers` are the run's own.",
    )
    steps_total: int = Field(0, description="How many steps the run's pipeline has.")
    step_counts: dict[str, int] = Field(
        default_factory=dict,
        description="How many of the run's steps are in each status (Pending, Ready, Running, "
        "WaitingForRetry, Completed, Failed): the whole run at a glance, whatever its size; given "
        "with the first page of steps (no steps_cursor), empty on later pages.",
    )
    failed_step_row: StepRow | None = Field(
        None, description="The step table row of failed_step (its last error), whatever page is shown."
    )
    steps: list[StepRow] = Field(
        default_factory=list,
        description="One page of the step table, in pipeline order: steps_page_size steps from "
        "steps_cursor (the first page by default).",
    )
    next_steps_cursor: str | None = Field(
        None, description="Pass it as steps_cursor for the next page of steps; none on the last page."
    )
    result: Any = Field(
        None,
        description="The execution's result once it finished: the sink step's data, or an object of "
        "the sink steps' data by step name when there are several.",
        json_schema_extra=ANY_JSON_VALUE,
    )


class CancelOutput(ToolOutput):
    requested_id: str
    shared_run_id: str | None = None
    local_run_id: str | None = None
    execution_id: str | None = None
    shared_status: str | None = None
    local_status: str | None = None
    message: str


class ControlOutput(ToolOutput):
    execution_id: str
    control_status: str = Field(
        description="None, Running, Pausing, Paused, Resuming, Cancelling, Cancelled or WaitingForInput."
    )
    action: str = Field(description="The last requested control action.")
    version: int = Field(description="Control state version; it grows by one per accepted action.")
    waiting_key: str | None = None
    waiting_step: str | None = None
    reason: str = ""


class ReplayOutput(ToolOutput):
    execution_id: str
    already_exists: bool = Field(description="Live state was still present: nothing was restored.")
    restored: bool = Field(description="Live state was rebuilt from the terminal snapshot or archive.")
    source: str = Field(description="Where the state came from: live, terminal_snapshot or archive.")
    status: str = Field(description="Execution status after the replay.")
    run: RunStatusOutput | None = Field(
        None,
        description="Only in the result of an MCP task (the call ran as a task): the run's final "
        "`run.status` answer.",
    )


class LedgerRow(ToolOutput):
    entry_id: str
    recorded_at: datetime
    event: str
    execution_id: str | None = None
    shared_run_id: str | None = None
    local_run_id: str | None = None
    runtime_instance_id: str | None = None
    assigned_runtime_instance_id: str | None = None
    step_name: str | None = None
    attributes: dict[str, Any] = {}


class LedgerOutput(ToolOutput):
    run_id: str
    entries: list[LedgerRow] = Field(description="Append-only audit events, oldest first.")


class SpanRow(ToolOutput):
    trace_id: str
    span_id: str
    parent_span_id: str | None = None
    name: str
    execution_id: str
    step_name: str | None = None
    start_ns: int
    end_ns: int
    duration_ms: float
    status: str
    attributes: dict[str, Any] = {}


class TraceOutput(ToolOutput):
    run_id: str
    execution_id: str
    spans: list[SpanRow] = Field(description="Execution and step spans (OpenTelemetry ids), by start time.")


class ForensicsRow(ToolOutput):
    record_id: str
    recorded_at: datetime
    runtime_instance_id: str
    shared_run_id: str | None = None
    execution_id: str | None = None
    kind: str
    action: str
    detail: dict[str, Any] = {}


class ForensicsOutput(ToolOutput):
    records: list[ForensicsRow] = Field(description="Recovery records of your tenant, oldest first.")


class PipelineSummary(ToolOutput):
    name: str
    version: str
    description: str
    step_count: int
    step_keys: list[str]
    resource_uri: str = Field(description="Read this MCP resource for the full definition.")


class PipelinesListOutput(ToolOutput):
    pipelines: list[PipelineSummary]


class ValidationProblem(ToolOutput):
    rule: str
    message: str
    hint: str | None = None


class PipelinesValidateOutput(ToolOutput):
    valid: bool
    name: str | None = None
    version: str | None = None
    step_count: int | None = None
    problem: ValidationProblem | None = Field(None, description="The first rule the pipeline breaks.")


class RunListEntry(ToolOutput):
    shared_run_id: str = Field(description="Follow it with run.status, ledger, trace.")
    pipeline: str
    submitted_by: str = Field(description="User id of the submitter.")
    submit_mode: str
    submitted_at: datetime
    shared_status: str = Field(description="Control-plane status of the shared run.")
    status: str = Field(
        description="Overall status: the most advanced of execution, local and shared; WaitingForInput "
        "or Paused for a running run parked on its gate."
    )
    local_run_id: str | None = None
    execution_id: str | None = None
    failure_reason: str | None = None
    failed_step: str | None = Field(None, description="The step whose failure failed the run.")
    started_at: datetime | None = None
    ended_at: datetime | None = None
    archived: bool = Field(
        description="The run finished and its hot state left Redis: the durable run record answers for it."
    )


class RunsListOutput(ToolOutput):
    tenant_id: str = Field(description="The runs listed are this tenant's only.")
    runs: list[RunListEntry] = Field(description="Newest first (submission time).")
    next_cursor: str | None = Field(
        None, description="Pass it as `cursor` to get the next, older page; null on the last page."
    )
    prev_cursor: str | None = Field(
        None, description="Pass it as `prev_cursor` to get the previous, newer page; null on the newest page."
    )
