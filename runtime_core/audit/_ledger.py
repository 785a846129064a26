"""LedgerRecorder: the append-only audit ledger, written in batches.

Owns turning engine events (and entries other components hand it: submitted, queued,
dispatched, paused, cancelled, ...) into LedgerEntry rows carrying the tenant from the
event's snapshot, this runtime instance's id (the assisting instance's, for the events of
workers assisting another instance's execution) and the run identities stored on the
execution (re-read when the execution is reassigned to a new run attempt, so entries after a
resume carry the new LocalRunId and earlier ones keep theirs), and buffering them so the
hot path does not pay one durable write per event. Flushes when a batch is full or
overdue, after events following which an execution may go quiet (finalized, parked,
paused) or before a call to a peer (`step.operation_started`), and on `flush()`. Must
never raise into the engine.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from typing import Any

from runtime_core.assistance import ASSISTING_INSTANCE_ATTRIBUTE
from runtime_core.audit._batching import DEFAULT_BATCH_SIZE, DEFAULT_FLUSH_INTERVAL_S, BatchBuffer
from runtime_core.dag import LIVE_EVENTS, DagStore, EngineEvent, ExecutionMeta
from runtime_core.retention import tenant_of
from runtime_core.storage import DurableStore, LedgerEntry

log = logging.getLogger("runtime_core.audit")

# Execution attributes (create_execution(attributes=...)) the ledger copies into every entry.
# Execution attributes naming the run attempt (the instance writes the OTel-style dotted name).
ASSIGNED_INSTANCE_FIELD = "assigned.runtime.instance.id"
RUN_IDENTITY_FIELDS = ("shared_run_id", "local_run_id", ASSIGNED_INSTANCE_FIELD)
WORKER_COUNT_FIELDS = ("max.local.workers.per.execution", "effective.worker.count.per.execution")
# Written at once: events after which an execution may go quiet; the operation id a step
# records before a call to a peer (the durable evidence of a call its process may not survive);
# an agent's sub-steps, which took seconds and may have cost money or acted.
AGENT_FLUSH_EVENTS = frozenset({"agent.turn_completed", "agent.tool_completed", "agent.approval_answered"})
FLUSH_EVENTS = frozenset(
    {"execution.finalized", "execution.paused", "step.parked", "step.operation_started", *AGENT_FLUSH_EVENTS}
)
# After these the run identities stored on the execution changed: the cached copy is stale.
IDENTITY_EVENTS = frozenset({"execution.reassigned"})
_MAX_TRACKED_EXECUTIONS = 1024


class LedgerRecorder:
    def __init__(
        self,
        store: DurableStore,
        dag_store: DagStore,
        *,
        instance_id: str,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
    ) -> None:
        self.store = store
        self.dag_store = dag_store
        self.instance_id = instance_id
        self._batches: BatchBuffer[LedgerEntry] = BatchBuffer(
            "ledger", store.append_ledger, batch_size=batch_size, flush_interval_s=flush_interval_s
        )
        self._sequence = itertools.count(1)
        self._contexts: OrderedDict[str, dict[str, str]] = OrderedDict()

    @property
    def pending(self) -> int:
        return self._batches.pending

    async def on_event(self, event: EngineEvent) -> None:
        if event.name in LIVE_EVENTS:
            return
        try:
            if event.name in IDENTITY_EVENTS:
                self._contexts.pop(event.execution_id, None)
            context = await self._context(event.execution_id, event.meta)
            attributes: dict[str, Any] = {**event.attributes}
            if event.worker_id is not None:
                attributes["worker_id"] = event.worker_id
            attributes.update({k: v for k, v in context.items() if k in WORKER_COUNT_FIELDS})
            # Built with its sequence, not copied to set it (`append`): two entries per step.
            entry = LedgerEntry(
                tenant_id=tenant_of(event.snapshot),
                execution_id=event.execution_id,
                shared_run_id=context.get("shared_run_id"),
                local_run_id=context.get("local_run_id"),
                runtime_instance_id=attributes.get(ASSISTING_INSTANCE_ATTRIBUTE, self.instance_id),
                assigned_runtime_instance_id=context.get(ASSIGNED_INSTANCE_FIELD),
                event=event.name,
                step_name=event.step_name,
                attributes=attributes,
                sequence=next(self._sequence),
            )
            await self._batches.add(entry, flush=event.name in FLUSH_EVENTS)
        except Exception:  # an observer must never crash the engine's worker
            log.exception("ledger.record_failed", extra={"execution_id": event.execution_id})
        if event.name == "execution.finalized":
            self._contexts.pop(event.execution_id, None)

    async def append(self, entry: LedgerEntry, *, flush: bool = False) -> None:
        """Buffer one entry (its sequence is set here) for the next batch write."""
        await self._batches.add(entry.model_copy(update={"sequence": next(self._sequence)}), flush=flush)

    async def flush(self) -> None:
        await self._batches.flush()

    async def close(self) -> None:
        await self.flush()

    async def _context(self, execution_id: str, meta: ExecutionMeta | None = None) -> dict[str, str]:
        """The run identity and worker counts of the execution (from the metadata the event
        carries, at creation; else read once and cached)."""
        context = self._contexts.get(execution_id)
        if context is None:
            fields = (*RUN_IDENTITY_FIELDS, *WORKER_COUNT_FIELDS)
            if meta is not None:
                values = [meta.attributes.get(field) for field in fields]
            else:
                values = await self.dag_store.hot_state.redis.hmget(
                    self.dag_store.keys(execution_id).meta, fields
                )
            context = {k: v for k, v in zip(fields, values, strict=True) if v is not None}
            self._contexts[execution_id] = context
            while len(self._contexts) > _MAX_TRACKED_EXECUTIONS:
                self._contexts.popitem(last=False)
        return context
