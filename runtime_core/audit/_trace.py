"""TraceRecorder: OpenTelemetry-compatible spans per execution and per step attempt.

Owns span ids (the trace id and the execution's root span id derive deterministically from
the ExecutionId, so every process agrees on them; step-attempt span ids are random), span
timing (a step attempt runs from `step.claimed` to its outcome event, the execution from
its creation to its finalization as recorded in Redis), and an agent step attempt's spans in
the OpenTelemetry GenAI conventions (`invoke_agent` under the attempt, a `chat` span per
model turn and an `execute_tool` span per tool call under it, with token usage); spans are
written in batches.
Must never raise into the engine.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from runtime_core.audit._attempts import AttemptKey, attempt_key, forget_execution, pop_attempt
from runtime_core.audit._batching import DEFAULT_BATCH_SIZE, DEFAULT_FLUSH_INTERVAL_S, BatchBuffer
from runtime_core.dag import DagStore, EngineEvent
from runtime_core.retention import tenant_of
from runtime_core.storage import DurableStore, TraceSpan

log = logging.getLogger("runtime_core.audit")

# OpenTelemetry status codes.
STATUS_OK, STATUS_ERROR, STATUS_UNSET = "OK", "ERROR", "UNSET"
_OUTCOME_STATUS = {
    "step.completed": STATUS_OK,
    "step.failed": STATUS_ERROR,
    "step.retry_scheduled": STATUS_ERROR,
    "step.transition_rejected": STATUS_ERROR,
    "step.parked": STATUS_UNSET,
}
_EXECUTION_STATUS = {"Completed": STATUS_OK, "Failed": STATUS_ERROR}
# An agent's sub-steps (OpenTelemetry GenAI conventions): children of its `invoke_agent` span.
_AGENT_OPERATIONS = {"agent.turn_completed": "chat", "agent.tool_completed": "execute_tool"}


def _hex_id(seed: str, length: int) -> str:
    value = hashlib.sha256(seed.encode("utf-8")).hexdigest()[:length]
    return value if value.strip("0") else "1".rjust(length, "0")


def _agent_span_id(step_span_id: str) -> str:
    """The `invoke_agent` span of a step attempt: known before the attempt ends (its sub-steps' parent)."""
    return _hex_id(f"agent:{step_span_id}", 16)


# Asked for on every span of an execution: hashed once per execution, not per step.
@functools.lru_cache(maxsize=1024)
def trace_id_for(execution_id: str) -> str:
    """The 32-hex OpenTelemetry trace id of an execution (same in every process)."""
    return _hex_id(f"trace:{execution_id}", 32)


@functools.lru_cache(maxsize=1024)
def execution_span_id(execution_id: str) -> str:
    """The 16-hex id of the execution's root span, parent of every step-attempt span."""
    return _hex_id(f"span:{execution_id}", 16)


@dataclass(frozen=True)
class _OpenSpan:
    span_id: str
    start_ns: int
    retry_count: int


class TraceRecorder:
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
        self._open: dict[AttemptKey, _OpenSpan] = {}
        self._agents: set[str] = set()  # step attempts (span ids) that ran agent sub-steps
        self._batches: BatchBuffer[TraceSpan] = BatchBuffer(
            "trace", store.put_spans, batch_size=batch_size, flush_interval_s=flush_interval_s
        )

    async def on_event(self, event: EngineEvent) -> None:
        try:
            if event.name == "step.claimed":
                self._open[attempt_key(event)] = _OpenSpan(
                    secrets.token_hex(8), time.time_ns(), int(event.attributes.get("retry_count", 0))
                )
            elif event.name in _AGENT_OPERATIONS:
                await self._agent_sub_step(event)
            elif event.name in _OUTCOME_STATUS:
                await self._close_step(event)
            elif event.name == "execution.finalized":
                await self._close_execution(event)
        except Exception:  # an observer must never crash the engine's worker
            log.exception("trace.record_failed", extra={"execution_id": event.execution_id})

    async def flush(self) -> None:
        await self._batches.flush()

    async def close(self) -> None:
        await self.flush()

    async def _agent_sub_step(self, event: EngineEvent) -> None:
        """A `chat` or `execute_tool` span under the attempt's `invoke_agent` span (opened on first use)."""
        opened = self._open.get(attempt_key(event))
        if opened is None:
            return
        self._agents.add(opened.span_id)
        found, operation = event.attributes, _AGENT_OPERATIONS[event.name]
        end_ns = time.time_ns()
        attributes: dict[str, Any] = {"gen_ai.operation.name": operation, "mcprt.agent.seq": found.get("seq")}
        if operation == "chat":
            name = f"chat {found.get('model')}"
            usage = found.get("usage") or {}
            attributes |= {
                "gen_ai.response.model": found.get("model"),
                "gen_ai.response.finish_reasons": [found.get("stop_reason")],
                "gen_ai.usage.input_tokens": usage.get("inputTokens", 0),
                "gen_ai.usage.output_tokens": usage.get("outputTokens", 0),
                "mcprt.agent.turn": found.get("turn"),
            }
            status = STATUS_OK
        else:
            name = f"execute_tool {found.get('tool')}"
            attributes |= {"gen_ai.tool.name": found.get("tool"), "gen_ai.tool.call.id": found.get("call_id")}
            status = STATUS_OK if found.get("state") == "completed" else STATUS_ERROR
        await self._add(
            event,
            span_id=secrets.token_hex(8),
            parent=_agent_span_id(opened.span_id),
            name=name,
            start_ns=end_ns - int(found.get("duration_ms", 0)) * 1_000_000,
            end_ns=end_ns,
            status=status,
            attributes=attributes,
        )

    async def _close_step(self, event: EngineEvent) -> None:
        opened = pop_attempt(self._open, event)
        if opened is None:
            return
        if opened.span_id in self._agents:
            self._agents.discard(opened.span_id)
            await self._add(
                event,
                span_id=_agent_span_id(opened.span_id),
                parent=opened.span_id,
                name=f"invoke_agent {event.step_name}",
                start_ns=opened.start_ns,
                end_ns=time.time_ns(),
                status=_OUTCOME_STATUS[event.name],
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": event.step_name},
            )
        attributes: dict[str, Any] = {
            "mcprt.step": event.step_name,
            "mcprt.worker_id": event.worker_id,
            "mcprt.retry_count": opened.retry_count,
            "mcprt.outcome": event.name,
        }
        if "code" in event.attributes:
            attributes["mcprt.error.code"] = event.attributes["code"]
        await self._add(
            event,
            span_id=opened.span_id,
            parent=execution_span_id(event.execution_id),
            name=f"step {event.step_name}",
            start_ns=opened.start_ns,
            end_ns=time.time_ns(),
            status=_OUTCOME_STATUS[event.name],
            attributes=attributes,
        )

    async def _close_execution(self, event: EngineEvent) -> None:
        if event.meta is not None and event.at_ms:  # the engine's event: both times known
            created, finalized = event.meta.created_at_ms, event.at_ms
        else:
            created, finalized = await self.dag_store.hot_state.redis.hmget(
                self.dag_store.keys(event.execution_id).meta, ["created_at_ms", "finalized_at_ms"]
            )
        end_ns = int(finalized) * 1_000_000 if finalized else time.time_ns()
        status = str(event.attributes.get("status"))
        await self._add(
            event,
            flush=True,
            span_id=execution_span_id(event.execution_id),
            parent=None,
            name="execution",
            start_ns=int(created) * 1_000_000 if created else end_ns,
            end_ns=end_ns,
            status=_EXECUTION_STATUS.get(status, STATUS_UNSET),
            attributes={"mcprt.execution.status": status},
        )
        forget_execution(self._open, event.execution_id)

    async def _add(
        self,
        event: EngineEvent,
        *,
        flush: bool = False,
        span_id: str,
        parent: str | None,
        name: str,
        start_ns: int,
        end_ns: int,
        status: str,
        attributes: dict[str, Any],
    ) -> None:
        span = TraceSpan(
            trace_id=trace_id_for(event.execution_id),
            span_id=span_id,
            parent_span_id=parent,
            tenant_id=tenant_of(event.snapshot),
            execution_id=event.execution_id,
            step_name=event.step_name,
            name=name,
            start_ns=start_ns,
            end_ns=max(start_ns, end_ns),
            status=status,
            attributes={
                **attributes,
                "mcprt.execution_id": event.execution_id,
                "mcprt.runtime_instance_id": self.instance_id,
            },
        )
        await self._batches.add(span, flush=flush)
