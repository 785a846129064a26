"""AgentRun: one attempt of an `ai.agent` step, a tool-calling loop whose every sub-step is a checkpoint.

Owns the loop: model turn, then each tool call it asked for, until a turn answers without
tools. Each sub-step has a sequence number; one already final in the journal (recorded by an
earlier attempt that crashed, or before a park) is replayed from its record, never called
again, so the conversation is rebuilt exactly and the loop resumes at the first sub-step not
final. A live model call is begun in the journal, made through `guarded_call` (operation
`turn-<n>`: the step's `modelOnUncertain` settles a call whose process died), ended with its
reply and usage, then its operation is settled done; a tool call likewise (the tool's own
step guards its side effects). A tool that requires approval parks the step until a human
answers under `<step>.approval.<seq>`; refusing records the call as refused and tells the
model. Limits are checked before each model turn; a cancelled run stops the loop before its
next model turn or tool call (the one under way finishes). Events tell the ledger the story. Must not
touch Redis itself (the journal does) nor speak a provider's wire format.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from runtime_core.agents._config import AgentConfig, AgentTool
from runtime_core.agents._journal import AgentJournal, SubStep, SubStepState, read_sub_steps
from runtime_core.agents._limits import AgentLimitGuard, Spent
from runtime_core.agents._tools import ToolOutcome, ToolRunner
from runtime_core.agents._tracing import chat_span, execute_tool_span, invoke_agent_span, record_reply
from runtime_core.dag import DagStore
from runtime_core.steps import (
    StepFailure,
    StepInvocation,
    StepParked,
    canonical_json,
    decided_reply,
    step_result,
    streamed_completion,
)
from runtime_core.steps.llm import ChatMessage, LlmProvider, LlmReply, LlmRequest, ToolCall, ToolSpec
from runtime_core.steps.operations import OperationState, guarded_call

APPROVAL_KEY = "approval"
_PREVIEW_CHARS = 300


def approval_waiting_key(step_name: str, seq: int) -> str:
    """The waiting key of an approval-gated tool call (input.submit answers under it)."""
    return f"{step_name}.{APPROVAL_KEY}.{seq}"


class AgentRun:
    def __init__(
        self,
        invocation: StepInvocation,
        config: AgentConfig,
        provider: LlmProvider,
        store: DagStore,
        tools: ToolRunner,
        messages: list[ChatMessage],
        system: str | None,
    ) -> None:
        claim = invocation.claim
        assert claim is not None
        self.invocation, self.config, self.provider, self.tools = invocation, config, provider, tools
        self.claim = claim
        self.store = store
        self.journal = AgentJournal(store, invocation.execution_id, invocation.step_name, claim.token)
        self.messages = messages
        self.system = system
        self.model = config.model or provider.default_model
        self.guard = AgentLimitGuard(config.limits, config.pricing, invocation.step_name)
        self.specs: list[ToolSpec] = []
        self.records: dict[int, SubStep] = {}
        self.spent = Spent()
        self.seq = 0
        self.tool_calls = 0
        self.started_at_ms = 0

    async def run(self) -> dict[str, Any]:
        invocation = self.invocation
        recorded = await read_sub_steps(self.store, invocation.execution_id, invocation.step_name)
        self.records = {record.seq: record for record in recorded}
        self.specs = [await self.tools.spec(tool, invocation) for tool in self.config.tools]
        self.started_at_ms = recorded[0].started_at_ms if recorded else int(time.time() * 1000)
        if recorded and invocation.human_input is None:
            final = [record.seq for record in recorded if record.state.final]
            await self.claim.emit(
                "agent.resumed", recorded=len(recorded), final_seqs=final, attempt=invocation.attempt
            )
        with invoke_agent_span(invocation.step_name, self.provider, self.model):
            while True:
                await self._unless_cancelled()
                reply = await self._model_turn()
                self.messages.append(
                    ChatMessage(role="assistant", text=reply.text, tool_calls=reply.tool_calls)
                )
                if not reply.tool_calls:
                    return self._result(reply)
                for call in reply.tool_calls:
                    await self._unless_cancelled()
                    outcome = await self._tool_call(call)
                    self.messages.append(
                        ChatMessage(
                            role="tool", tool_call_id=call.id, text=outcome.text, is_error=outcome.is_error
                        )
                    )

    async def _unless_cancelled(self) -> None:
        """Execution cancel lets claimed steps finish; an agent's step could run for many more
        turns and tool calls (side effects, cost), so it stops between sub-steps instead."""
        if await self.journal.run_cancelled():
            raise StepFailure(
                "the run was cancelled: the agent stopped before its next model turn or tool call",
                code="permanent",
            )

    # Model turns

    async def _model_turn(self) -> LlmReply:
        seq, turn = self._next(), self.spent.turns
        recorded = self.records.get(seq)
        if recorded is not None and recorded.state.final:
            self.spent.add(recorded.usage)
            return _recorded_reply(recorded, self.model)
        self.guard.before_turn(self.spent, self.started_at_ms, int(time.time() * 1000))
        request = LlmRequest(
            messages=list(self.messages),
            tools=self.specs,
            system=self.system,
            model=self.config.model,
            params=dict(self.config.params),
        )
        fields = {
            "kind": "model",
            "turn": turn,
            "input": {"messages": len(self.messages), "requestSha256": _digest(request)},
        }
        await self._begin(seq, SubStepState.STARTED, fields)
        started = time.monotonic()
        with chat_span(self.provider, self.model, turn) as span:
            reply = await guarded_call(
                self.invocation,
                f"turn-{turn}",
                self.config.model_on_uncertain,
                lambda operation_id: self._complete(request),
                from_decision=lambda decision: decided_reply(decision, self.model),
                peer=f"LLM provider {self.config.provider!r}",
            )
            record_reply(span, reply)
        usage = reply.usage.record(self.config.provider, reply.model) if reply.usage else None
        output = {
            "text": reply.text,
            "toolCalls": [call.model_dump() for call in reply.tool_calls] or None,
            "model": reply.model,
            "stopReason": reply.stop_reason,
        }
        await self._end(seq, SubStepState.COMPLETED, {"output": output, "usage": usage})
        if self.invocation.operations is not None:
            await self.invocation.operations.settle(f"turn-{turn}", OperationState.DONE, "answered")
        self.spent.add(usage)
        await self.claim.emit(
            "agent.turn_completed",
            seq=seq,
            turn=turn,
            model=reply.model,
            stop_reason=reply.stop_reason,
            tool_calls=[call.name for call in reply.tool_calls],
            text=reply.text[:_PREVIEW_CHARS],
            duration_ms=int((time.monotonic() - started) * 1000),
            **({"usage": usage} if usage else {}),
        )
        return reply

    async def _complete(self, request: LlmRequest) -> LlmReply:
        seconds = self.guard.seconds_left(self.started_at_ms, int(time.time() * 1000))
        try:
            async with asyncio.timeout(seconds):
                streaming = self.invocation if self.config.stream else None
                return await streamed_completion(self.provider, request, streaming)
        except TimeoutError:
            raise self.guard.time_exceeded(int(time.time() * 1000) - self.started_at_ms) from None

    # Tool calls

    async def _tool_call(self, call: ToolCall) -> ToolOutcome:
        seq = self._next()
        recorded = self.records.get(seq)
        if recorded is not None and recorded.state.final:
            self.tool_calls += 1
            output = recorded.output or {}
            return ToolOutcome(text=str(output.get("text", "")), is_error=bool(output.get("isError")))
        fields = {
            "kind": "tool",
            "turn": self.spent.turns - 1,
            "name": call.name,
            "call_id": call.id,
            "input": call.arguments,
        }
        tool = self.config.tool(call.name)
        if tool is None:
            known = ", ".join(t.name for t in self.config.tools) or "none"
            return await self._told(
                seq,
                fields,
                SubStepState.FAILED,
                f"[not_found] there is no tool {call.name!r} (tools: {known})",
            )
        human_input = self.invocation.human_input
        if tool.requires_approval and (recorded is None or recorded.state is SubStepState.AWAITING_APPROVAL):
            refused = await self._approval(seq, tool, call, fields)
            if refused is not None:
                return refused
            human_input = None  # the answer was the approval's
        await self._begin(seq, SubStepState.STARTED, fields)
        started = time.monotonic()
        with execute_tool_span(tool.name, call.id, "pipeline" if tool.pipeline else "step"):
            outcome = await self.tools.run(self.invocation, tool, call, seq, human_input)
        state = SubStepState.FAILED if outcome.is_error else SubStepState.COMPLETED
        await self._end(seq, state, {"output": outcome.record()})
        self.tool_calls += 1
        await self.claim.emit(
            "agent.tool_completed",
            seq=seq,
            tool=tool.name,
            call_id=call.id,
            state=state.value,
            duration_ms=int((time.monotonic() - started) * 1000),
            **({"child_run": outcome.child_run} if outcome.child_run else {}),
        )
        return outcome

    async def _approval(
        self, seq: int, tool: AgentTool, call: ToolCall, fields: dict[str, Any]
    ) -> ToolOutcome | None:
        """None once approved; the refusal the model reads when refused; parks while unanswered."""
        waiting_key = approval_waiting_key(self.invocation.step_name, seq)
        answer = _approval_answer(self.invocation.human_input)
        if answer is None:
            await self._begin(seq, SubStepState.AWAITING_APPROVAL, fields)
            await self.claim.emit(
                "agent.approval_requested", seq=seq, tool=tool.name, waiting_key=waiting_key
            )
            raise StepParked(
                waiting_key,
                prompt=f"Agent step {self.invocation.step_name!r} asks to call tool {tool.name!r} with "
                f"{canonical_json(call.arguments)[:_PREVIEW_CHARS]}. Approve it?",
            )
        approved = bool(answer.get("approved"))
        await self.claim.emit("agent.approval_answered", seq=seq, tool=tool.name, approved=approved)
        if approved:
            await self._end(seq, SubStepState.APPROVED, {"approval": answer}, consume_input=True)
            return None
        comment = str(answer.get("comment") or "").strip()
        text = "A human refused this tool call; it did not run." + (
            f" Their comment: {comment}" if comment else ""
        )
        self.tool_calls += 1
        await self._end(
            seq,
            SubStepState.REFUSED,
            {"approval": answer, "output": {"text": text, "isError": True}},
            consume_input=True,
        )
        return ToolOutcome(text=text, is_error=True)

    async def _told(self, seq: int, fields: dict[str, Any], state: SubStepState, text: str) -> ToolOutcome:
        await self._begin(seq, SubStepState.STARTED, fields)
        await self._end(seq, state, {"output": {"text": text, "isError": True}})
        self.tool_calls += 1
        return ToolOutcome(text=text, is_error=True)

    # Journal and result

    def _next(self) -> int:
        seq, self.seq = self.seq, self.seq + 1
        return seq

    async def _begin(self, seq: int, state: SubStepState, fields: dict[str, Any]) -> None:
        _, record, _ = await self.journal.begin(seq, state, fields)
        self.records[seq] = record

    async def _end(
        self, seq: int, state: SubStepState, fields: dict[str, Any], *, consume_input: bool = False
    ) -> None:
        self.records[seq] = await self.journal.end(seq, state, fields, consume_input=consume_input)

    def _result(self, reply: LlmReply) -> dict[str, Any]:
        spent = self.spent
        usage: dict[str, Any] = {
            "provider": self.config.provider,
            "model": reply.model,
            "inputTokens": spent.input_tokens,
            "outputTokens": spent.output_tokens,
            "totalTokens": spent.tokens,
        }
        cost = spent.cost(self.config.pricing)
        if cost is not None:
            usage["costUsd"] = cost
        data = {
            "text": reply.text,
            "turns": spent.turns,
            "toolCalls": self.tool_calls,
            "transcript": [self.records[seq].view(timing=False) for seq in sorted(self.records)],
        }
        return step_result(data, model=reply.model, provider=self.config.provider, usage=usage)


def _approval_answer(human_input: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(human_input, dict) or not isinstance(human_input.get("approved"), bool):
        return None  # not an answer to this question: ask again
    return human_input


def _recorded_reply(record: SubStep, model: str) -> LlmReply:
    output = record.output or {}
    calls = [ToolCall.model_validate(call) for call in output.get("toolCalls") or []]
    return LlmReply(
        text=str(output.get("text", "")),
        model=str(output.get("model") or model),
        tool_calls=calls,
        stop_reason=output.get("stopReason"),
    )


def _digest(request: LlmRequest) -> str:
    return hashlib.sha256(canonical_json(request.model_dump(mode="json")).encode()).hexdigest()
