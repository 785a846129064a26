"""Tools `replay`, `ledger`, `trace` and `forensics`: proof of what ran, tenant-scoped.

Owns shaping ReplayService and AuditQueries answers into tool answers, and answering
"not found" (never an empty success) when a run has no ledger or trace visible to the
caller's tenant, so a foreign id looks exactly like an unknown one. Must not write audit
records or restore state itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp_runtime._inputs import ForensicsInput, LedgerInput, ReplayInput, TraceInput
from mcp_runtime._outputs import (
    ForensicsOutput,
    ForensicsRow,
    LedgerOutput,
    LedgerRow,
    ReplayOutput,
    SpanRow,
    TraceOutput,
)
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.audit import AuditQueries, ReplayService
from runtime_core.errors import NotFoundError
from runtime_core.identity import ExecutionContextSnapshot, parse_any_run_id
from runtime_core.storage import TraceSpan

ExecutionIdResolver = Callable[[str, ExecutionContextSnapshot], Awaitable[str]]
"""Maps any run id (srun_ / lrun_ / exec_) of the caller's tenant to its ExecutionId."""


def _nothing_visible(what: str, run_id: str) -> NotFoundError:
    return NotFoundError(
        f"No {what} for '{run_id}' in your tenant.",
        hint="Check the id with run.status (ids of other tenants are never visible); a run that was "
        "not dispatched yet has no execution to trace.",
    )


def _span_row(span: TraceSpan) -> SpanRow:
    return SpanRow(
        **span.model_dump(exclude={"tenant_id"}), duration_ms=round((span.end_ns - span.start_ns) / 1e6, 3)
    )


class AuditTools:
    def __init__(
        self, replay: ReplayService, queries: AuditQueries, execution_id_for: ExecutionIdResolver
    ) -> None:
        self._replay = replay
        self._queries = queries
        self._execution_id_for = execution_id_for

    async def replay(self, request: ReplayInput, call: ToolCall) -> ReplayOutput:
        result = await self._replay.replay(request.execution_id, call.snapshot)
        return ReplayOutput.model_validate(result.model_dump(mode="json"))

    async def ledger(self, request: LedgerInput, call: ToolCall) -> LedgerOutput:
        kind, run_id = parse_any_run_id(request.run_id)
        if kind == "shared":
            entries = await self._queries.ledger(call.snapshot, shared_run_id=run_id, limit=request.limit)
        else:
            execution_id = await self._execution_id_for(run_id, call.snapshot)
            entries = await self._queries.ledger(
                call.snapshot, execution_id=execution_id, limit=request.limit
            )
        if not entries:
            raise _nothing_visible("ledger entries", run_id)
        rows = [
            LedgerRow.model_validate(entry.model_dump(exclude={"tenant_id", "sequence"})) for entry in entries
        ]
        return LedgerOutput(run_id=run_id, entries=rows)

    async def trace(self, request: TraceInput, call: ToolCall) -> TraceOutput:
        execution_id = await self._execution_id_for(request.run_id, call.snapshot)
        spans = await self._queries.trace(call.snapshot, execution_id)
        if not spans:
            raise _nothing_visible("trace spans", request.run_id)
        return TraceOutput(
            run_id=request.run_id, execution_id=execution_id, spans=[_span_row(s) for s in spans]
        )

    async def forensics(self, request: ForensicsInput, call: ToolCall) -> ForensicsOutput:
        records = await self._queries.forensics(
            call.snapshot, runtime_instance_id=request.runtime_instance_id, execution_id=request.execution_id
        )
        return ForensicsOutput(
            records=[
                ForensicsRow.model_validate(record.model_dump(exclude={"tenant_id"})) for record in records
            ]
        )

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="replay",
                title="Replay an execution",
                description=(
                    "Replay(ExecutionId): if the execution's live state still exists nothing changes "
                    "(already_exists=true, restored=false); if it was deleted, it is restored from its "
                    "terminal snapshot (or archive) with the same result and fingerprint (restored=true). "
                    "Idempotent: replaying twice restores once."
                ),
                input_model=ReplayInput,
                output_model=ReplayOutput,
                handler=self.replay,
                read_only=False,
                idempotent=True,
            ),
            ToolSpec(
                name="ledger",
                title="Run ledger",
                description=(
                    "The append-only ledger of a run: submitted, queued, dispatched, started, every step "
                    "claimed / completed / failed / retried / recovered, paused, cancelled, finalized, with "
                    "runtime instance ids and worker counts. A SharedRunId gives the whole run; an "
                    "ExecutionId or LocalRunId gives the execution's entries."
                ),
                input_model=LedgerInput,
                output_model=LedgerOutput,
                handler=self.ledger,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                name="trace",
                title="Run trace",
                description=(
                    "Trace spans of a run's execution (one per execution and per step attempt, with "
                    "timing and OpenTelemetry-compatible trace/span ids). Accepts any run id; a run that "
                    "has not been dispatched yet has no execution and answers not found."
                ),
                input_model=TraceInput,
                output_model=TraceOutput,
                handler=self.trace,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                name="forensics",
                title="Recovery forensics",
                description=(
                    "Recovery forensics of your tenant: what the recovery reconciler did when a runtime "
                    "instance was lost (in-flight executions resumed with the same ExecutionId, local-"
                    "queued runs requeued with the same SharedRunId) and why. Filter by execution or by "
                    "lost runtime instance; an empty list means no recovery happened."
                ),
                input_model=ForensicsInput,
                output_model=ForensicsOutput,
                handler=self.forensics,
                read_only=True,
                idempotent=True,
            ),
        ]
