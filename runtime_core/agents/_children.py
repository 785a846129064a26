"""QueuedChildRuns: an agent tool that is a pipeline runs as a child run, submitted like any other run.

Owns starting the child run of one tool call, from any process that runs agents (a serve
process or a runtime-instance process), through the runtime's one submit path (the
`SharedRuntimeController` it is given: input and pipeline checks, rate limits, concurrency
keys, the durable copy of the request, the pump's wake-up, the trace, the ledger): queued
first under the child's snapshot (`ExecutionContextSnapshot.for_child`: the agent's principal
and tenant, naming the parent call, which the archive keeps) with an idempotency key derived
from the call (the agent's ExecutionId, step and sub-step), so a replayed or recovered call
finds the child it already started, never a second one. Then waiting for the child's end,
woken by its terminal run event (the process's run-event subscription, re-reading the run on
every gap and at a slow safety interval, since pub/sub may drop an event), and reading its
result: its sink step's data, from the hot state or, once archived, from its durable run
record. A child that fails, is cancelled, rejected or refused at submit is a permanent tool
failure the model reads; a rate-limited submit waits its turn. When the agent's own run is
cancelled meanwhile (its `run.cancel_requested` event, or its control status read at a
safety interval), the child is cancelled too (`ChildCanceller`; asked again shortly while its
dispatch settles) and the wait goes on until it ended: the agent then stops, and its run's
cancel completes without leaving the child running. Must not run the child itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass
from typing import Any

from runtime_core.agents._child_cancel import ChildCanceller
from runtime_core.agents._config import AgentTool
from runtime_core.dag import DagEngine
from runtime_core.errors import RuntimeCoreError, StoreUnavailableError
from runtime_core.events import RunEvent, RunEventSubscriber, RunEventType
from runtime_core.flow import RateLimitedError
from runtime_core.instances import LocalRunStatus, RunExecutionIndex
from runtime_core.pipeline import PipelineDefinition
from runtime_core.queueing import (
    MAX_IDEMPOTENCY_KEY_LENGTH,
    IdempotencyKey,
    IdempotentRunGoneError,
    SharedRunStatus,
    SharedRunStore,
    SharedRuntimeController,
    SubmitMode,
)
from runtime_core.steps import StepConfigError, StepFailure, StepInvocation, unwrap_result
from runtime_core.storage import DurableStore

CHILD_KEY_WINDOW_MS = 7 * 24 * 3_600_000
SAFETY_READ_S = 5.0
"""How long a wait for a child's end trusts its run event before reading the run again."""
CANCEL_AGAIN_S = 0.2
"""How soon a child's cancellation is asked again when it could not be settled yet."""
_ENDED_BEFORE_RUNNING = frozenset(
    {SharedRunStatus.REJECTED, SharedRunStatus.CANCELLED, SharedRunStatus.FAILED}
)


def child_idempotency_key(call_key: str) -> str:
    """The call's key itself, or (a very long step name) the ExecutionId and sub-step around the
    sha256 of the rest, within the idempotency key's length."""
    if len(call_key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        return call_key
    execution_id, _, rest = call_key.partition(":")
    step, _, seq = rest.rpartition(":")
    return f"{execution_id}:sha256-{hashlib.sha256(step.encode()).hexdigest()}:{seq}"


@dataclass(frozen=True)
class _End:
    status: str
    execution_id: str | None
    failure_reason: str | None
    stored: dict[str, Any] | None = None  # the sink results of an archived run (its durable record)

    @property
    def completed(self) -> bool:
        return self.status == LocalRunStatus.COMPLETED.value


class QueuedChildRuns:
    def __init__(
        self,
        submitter: SharedRuntimeController,
        engine: DagEngine,
        durable: DurableStore,
        events: RunEventSubscriber,
    ) -> None:
        """`submitter`: this process's submit path (a process with a control plane gives its own,
        whose pump it wakes)."""
        hot_state = engine.store.hot_state
        self.submitter = submitter
        self.engine = engine
        self.durable = durable
        self.events = events
        self.runs = SharedRunStore(hot_state)
        self.index = RunExecutionIndex(hot_state)
        # How this process cancels a child whose parent was cancelled (None: it is left to run).
        self.canceller: ChildCanceller | None = None

    async def run_child(
        self, parent: StepInvocation, tool: AgentTool, arguments: dict[str, Any], call_key: str
    ) -> tuple[Any, dict[str, Any]]:
        assert parent.snapshot is not None
        try:
            pipeline = tool.definition()
        except StepConfigError as unresolved:
            raise StepFailure(unresolved.message, code="permanent") from None
        shared_run_id, deduplicated = await self._submitted(parent, tool, pipeline, arguments, call_key)
        if parent.claim is not None:
            await parent.claim.emit(
                "agent.child_run_started",
                tool=tool.name,
                child_shared_run_id=shared_run_id,
                deduplicated=deduplicated,
            )
        ended = await self._ended(parent, shared_run_id)
        if not ended.completed:
            raise StepFailure(
                f"child run {shared_run_id} ended {ended.status}"
                + (f": {ended.failure_reason}" if ended.failure_reason else ""),
                code="permanent",
            )
        data = await self._data(parent, ended)
        return data, {"sharedRunId": shared_run_id, "executionId": ended.execution_id}

    async def _submitted(
        self,
        parent: StepInvocation,
        tool: AgentTool,
        pipeline: PipelineDefinition,
        arguments: dict[str, Any],
        call_key: str,
    ) -> tuple[str, bool]:
        """The child's SharedRunId, and whether this call's key had made it already."""
        assert parent.snapshot is not None
        snapshot = parent.snapshot.for_child(parent.execution_id, parent.step_name, call_key)
        key = IdempotencyKey.for_request(
            child_idempotency_key(call_key), pipeline, arguments, window_ms=CHILD_KEY_WINDOW_MS
        )
        while True:
            try:
                result = await self.submitter.submit(
                    pipeline, arguments, SubmitMode.QUEUE_FIRST, snapshot, idempotency=key
                )
                return result.shared_run_id, result.deduplicated
            except RateLimitedError as limited:  # the tenant's submit limits pace its agents' children too
                if parent.claim is not None:
                    await parent.claim.emit(
                        "agent.child_run_rate_limited",
                        tool=tool.name,
                        limit=limited.label,
                        retry_after_ms=limited.retry_after_ms,
                    )
                await asyncio.sleep(limited.retry_after_ms / 1000)
            except IdempotentRunGoneError as gone:  # made before and archived since: its record answers
                return gone.shared_run_id, True
            except StoreUnavailableError:
                raise
            except RuntimeCoreError as refused:
                raise StepFailure(
                    f"tool {tool.name!r}: its child run was refused: {refused.message}", code="permanent"
                ) from None

    async def _ended(self, parent: StepInvocation, shared_run_id: str) -> _End:
        """Once the child ended: read when its terminal run event rings, when the parent's
        cancel is requested, when the subscription (re)starts, and every SAFETY_READ_S; the
        child is cancelled once the parent run is."""
        assert parent.snapshot is not None
        rung = asyncio.Event()

        def ring(event: RunEvent) -> None:
            if event.terminal and event.shared_run_id == shared_run_id:
                rung.set()
            elif event.type is RunEventType.CANCEL_REQUESTED and event.execution_id == parent.execution_id:
                rung.set()

        unsubscribe = self.events.listen(ring, gap=rung.set)
        cancel_asked = False
        try:
            while True:
                rung.clear()
                ended = await self._end_of(shared_run_id, parent.snapshot.tenant_id)
                if ended is not None:
                    return ended
                wait_s = SAFETY_READ_S
                if not cancel_asked and await self._parent_cancelled(parent):
                    cancel_asked = await self._cancel_child(parent, shared_run_id)
                    wait_s = SAFETY_READ_S if cancel_asked else CANCEL_AGAIN_S
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(rung.wait(), wait_s)
        finally:
            unsubscribe()

    async def _parent_cancelled(self, parent: StepInvocation) -> bool:
        if self.canceller is None:
            return False
        return await self.engine.store.is_cancelled(parent.execution_id)

    async def _cancel_child(self, parent: StepInvocation, shared_run_id: str) -> bool:
        """Ask for the child's cancellation; True once asked (recorded on the parent's step)."""
        assert self.canceller is not None and parent.snapshot is not None
        reason = f"its parent run was cancelled (execution {parent.execution_id}, step {parent.step_name})"
        if not await self.canceller.cancel_child(shared_run_id, parent.snapshot, reason):
            return False
        if parent.claim is not None:
            await parent.claim.emit("agent.child_run_cancelled", child_shared_run_id=shared_run_id)
        return True

    async def _end_of(self, shared_run_id: str, tenant_id: str) -> _End | None:
        """The child's end, or None while it is queued or running (or being queued again)."""
        indexed = await self.index.get_by_shared(shared_run_id)
        if indexed is not None and indexed.status.is_terminal:
            return _End(indexed.status.value, indexed.execution_id, indexed.failure_reason)
        shared = await self.runs.get(shared_run_id)
        if shared is not None:
            if shared.status in _ENDED_BEFORE_RUNNING:
                return _End(shared.status.value, None, shared.failure_reason)
            return None
        if indexed is not None:
            return None
        record = await self.durable.find_run_record(tenant_id, shared_run_id=shared_run_id)
        if record is None:
            return None  # its hot records are gone and it is not archived: it is queued again
        return _End(record.status, record.execution_id, record.failure_reason, stored=record.result)

    async def _data(self, parent: StepInvocation, ended: _End) -> Any:
        """The completed child's sink data (one sink: its data alone)."""
        assert parent.snapshot is not None and ended.execution_id is not None
        stored = ended.stored
        if stored is None:
            view = await self.engine.store.read_execution(ended.execution_id)
            if view is not None:
                sinks = view.meta.pipeline.sink_step_names()
                stored = {step.name: step.result for step in view.steps if step.name in sinks}
            else:  # archived meanwhile: its durable record answers
                record = await self.durable.find_run_record(
                    parent.snapshot.tenant_id, execution_id=ended.execution_id
                )
                stored = record.result if record is not None else {}
        decoded = await self.engine.results.decode(ended.execution_id, stored, parent.snapshot)
        values = {name: unwrap_result(value) for name, value in decoded.items()}
        return next(iter(values.values())) if len(values) == 1 else values
