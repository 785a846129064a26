"""QueuedChildRuns: an agent tool that is a pipeline runs as a child run, through the shared queue.

Owns starting the child run of one tool call, from any process that runs agents (a serve
process or a runtime-instance process): a QueueFirst shared run of the parent's tenant and
snapshot, created with the call's key as its idempotency key (a replayed or retried call finds
the child it already made, never a second one), journaled (`shared_run.submitted`) with the parent's ids
(the child's ledger names its parent; the parent's names the child: `agent.child_run_started`),
then waiting for it to end (polling the run-execution index; any control plane's pump
dispatches it) and reading its result: its sink step's data, from the hot state or, once
archived, from its durable run record. A child that fails, is cancelled or rejected is a
permanent tool failure the model reads. Must not run the child itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

from runtime_core.agents._config import AgentTool
from runtime_core.dag import DagEngine
from runtime_core.instances import LocalRunStatus, RunExecutionIndex
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import (
    IdempotencyKey,
    QueueOutcome,
    SharedQueue,
    SharedRunJournal,
    SharedRunRecord,
    SharedRunStatus,
    SharedRunStore,
    SubmitMode,
)
from runtime_core.steps import StepFailure, StepInvocation, unwrap_result
from runtime_core.storage import DurableStore

CHILD_KEY_WINDOW_MS = 7 * 24 * 3_600_000
POLL_S = 0.1
_ENDED_BEFORE_RUNNING = frozenset(
    {SharedRunStatus.REJECTED, SharedRunStatus.CANCELLED, SharedRunStatus.FAILED}
)


class QueuedChildRuns:
    def __init__(self, engine: DagEngine, durable: DurableStore, journal: SharedRunJournal) -> None:
        hot_state = engine.store.hot_state
        self.engine = engine
        self.durable = durable
        self.journal = journal
        self.queue = SharedQueue(hot_state)
        self.runs = SharedRunStore(hot_state)
        self.index = RunExecutionIndex(hot_state)

    async def run_child(
        self, parent: StepInvocation, tool: AgentTool, arguments: dict[str, Any], call_key: str
    ) -> tuple[Any, dict[str, Any]]:
        assert tool.pipeline is not None and parent.snapshot is not None
        shared_run_id = await self._started(parent, tool, arguments, call_key)
        link = {"sharedRunId": shared_run_id}
        if parent.claim is not None:
            await parent.claim.emit(
                "agent.child_run_started", tool=tool.name, child_shared_run_id=shared_run_id
            )
        data, execution_id = await self._result(parent, shared_run_id)
        return data, {**link, "executionId": execution_id}

    async def _started(
        self, parent: StepInvocation, tool: AgentTool, arguments: dict[str, Any], call_key: str
    ) -> str:
        assert tool.pipeline is not None and parent.snapshot is not None
        pipeline = parse_pipeline(tool.pipeline)
        snapshot = parent.snapshot.for_child(parent.execution_id, parent.step_name, call_key)
        record = SharedRunRecord(
            shared_run_id=self.runs.keys.new_run_id(snapshot.tenant_id),
            status=SharedRunStatus.QUEUED_GLOBALLY,
            submit_mode=SubmitMode.QUEUE_FIRST,
            tenant_id=snapshot.tenant_id,
            snapshot=snapshot,
            pipeline=pipeline,
            input=arguments,
        )
        key = IdempotencyKey.for_request(call_key, pipeline, arguments, window_ms=CHILD_KEY_WINDOW_MS)
        queued = await self.queue.enqueue_new(record, key)
        if queued.outcome in (QueueOutcome.DUPLICATE, QueueOutcome.KEY_CONFLICT) and queued.detail:
            return queued.detail  # made by this call before (a replay or a retry)
        if not queued.applied:
            raise StepFailure(f"tool {tool.name!r}: its child run was not queued ({queued.outcome.name})")
        await self.journal.record_submitted(record)
        return record.shared_run_id

    async def _result(self, parent: StepInvocation, shared_run_id: str) -> tuple[Any, str | None]:
        """The ended child's sink data and its ExecutionId; StepFailure when it did not complete."""
        assert parent.snapshot is not None
        while True:
            indexed = await self.index.get_by_shared(shared_run_id)
            if indexed is not None and indexed.status.is_terminal:
                if indexed.status is not LocalRunStatus.COMPLETED:
                    raise _child_failed(shared_run_id, indexed.status.value, indexed.failure_reason)
                return await self._data(parent, shared_run_id, indexed.execution_id), indexed.execution_id
            shared = await self.runs.get(shared_run_id)
            if shared is not None and shared.status in _ENDED_BEFORE_RUNNING:
                raise _child_failed(shared_run_id, shared.status.value, shared.failure_reason)
            await asyncio.sleep(POLL_S)  # the child advances in another worker, maybe another process

    async def _data(self, parent: StepInvocation, shared_run_id: str, execution_id: str | None) -> Any:
        assert parent.snapshot is not None and execution_id is not None
        view = await self.engine.store.read_execution(execution_id)
        if view is not None:
            sinks = view.meta.pipeline.sink_step_names()
            stored = {step.name: step.result for step in view.steps if step.name in sinks}
        else:  # archived meanwhile: its durable record answers
            record = await self.durable.find_run_record(
                parent.snapshot.tenant_id, shared_run_id=shared_run_id
            )
            stored = record.result if record is not None else {}
        decoded = await self.engine.results.decode(execution_id, stored, parent.snapshot)
        values = {name: unwrap_result(value) for name, value in decoded.items()}
        return next(iter(values.values())) if len(values) == 1 else values


def _child_failed(shared_run_id: str, status: str, reason: str | None) -> StepFailure:
    return StepFailure(
        f"child run {shared_run_id} ended {status}" + (f": {reason}" if reason else ""), code="permanent"
    )
