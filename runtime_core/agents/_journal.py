"""AgentJournal: the durable checkpoints of one agent step (its sub-steps) in the execution's hot state.

Owns the typed wrappers of `lua/agent_checkpoint_begin.lua` / `agent_checkpoint_end.lua`
(the only place that knows their KEYS/ARGV order), fenced by the step's claim token, the
`SubStep` record they keep (kind, state, attempts, server times, and the sub-step's input,
output, usage, approval or error stored as JSON text, opaque to Lua), and reading every
sub-step of a step back, for the agent's replay and for `run.status`. Must not decide what a
sub-step means: the agent loop does.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime_core.dag import DagStore
from runtime_core.errors import RuntimeCoreError

# JSON payload fields of a record, stored as text so Lua never re-encodes them.
PAYLOAD_FIELDS = ("input", "output", "usage", "approval", "error")


class SubStepState(StrEnum):
    STARTED = "started"  # under way (a call may be in flight under the claim that began it)
    AWAITING_APPROVAL = "awaiting_approval"  # a tool call parked for a human's answer
    APPROVED = "approved"  # a human approved it; the call has not started yet
    COMPLETED = "completed"
    FAILED = "failed"  # the tool answered a failure: the model was told
    REFUSED = "refused"  # a human refused the call: it never ran, the model was told

    @property
    def final(self) -> bool:
        return self in (SubStepState.COMPLETED, SubStepState.FAILED, SubStepState.REFUSED)


class BeginOutcome(StrEnum):
    NEW = "new"
    TAKEN = "taken"  # an earlier claim's record, not final: this claim carries it on
    FINAL = "final"
    LOST = "lost"
    GAP = "gap"


class SubStep(BaseModel):
    """One model turn (`kind` model) or tool call (`kind` tool) of an agent step."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    seq: int
    kind: str
    state: SubStepState
    attempts: int = 1
    started_at_ms: int = 0
    ended_at_ms: int | None = None
    turn: int = 0
    name: str | None = None  # the tool's name
    call_id: str | None = None
    input: Any = None
    output: Any = None
    usage: Any = None
    approval: Any = None
    error: Any = None

    @classmethod
    def decode(cls, raw: str | bytes) -> SubStep:
        fields = json.loads(raw)
        for name in PAYLOAD_FIELDS:
            if isinstance(fields.get(name), str):
                fields[name] = json.loads(fields[name])
        return cls.model_validate(fields)

    def view(self, *, timing: bool = True) -> dict[str, Any]:
        """The record as `run.status` shows it (camelCase, no token); without `timing` (attempts and
        times) as the step result keeps it, the same however many attempts it took."""
        shown = {
            "seq": self.seq,
            "kind": self.kind,
            "state": self.state.value,
            "turn": self.turn,
            **(
                {"attempts": self.attempts, "startedAtMs": self.started_at_ms, "endedAtMs": self.ended_at_ms}
                if timing
                else {}
            ),
            "name": self.name,
            "callId": self.call_id,
            "input": self.input,
            "output": self.output,
            "usage": self.usage,
            "approval": self.approval,
            "error": self.error,
        }
        return {key: value for key, value in shown.items() if value is not None}


def encode_fields(fields: dict[str, Any]) -> str:
    """Fields for a script: payloads as JSON text, the rest as they are."""
    encoded = {
        name: json.dumps(value, sort_keys=True, separators=(",", ":")) if name in PAYLOAD_FIELDS else value
        for name, value in fields.items()
        if value is not None
    }
    return json.dumps(encoded, separators=(",", ":"))


class CheckpointLost(RuntimeCoreError):
    """The step's claim was lost (recovered, reassigned): this attempt must stop."""


class AgentJournal:
    def __init__(self, store: DagStore, execution_id: str, step_name: str, token: str) -> None:
        self._store = store
        self.execution_id = execution_id
        self._scripts = store.hot_state.scripts
        self._keys = store.keys(execution_id)
        self.step_name = step_name
        self.token = token

    async def run_cancelled(self) -> bool:
        """Whether the agent's execution was cancelled (its claimed steps drain, nothing new starts)."""
        return await self._store.is_cancelled(self.execution_id)

    async def begin(
        self, seq: int, state: SubStepState, fields: dict[str, Any]
    ) -> tuple[BeginOutcome, SubStep, SubStepState | None]:
        """Record sub-step `seq` in `state`: the outcome, the record now, and its state before
        (TAKEN only). CheckpointLost when the claim is gone."""
        k = self._keys
        reply = await self._scripts["agent_checkpoint_begin"](
            keys=[k.token, k.agents],
            args=[self.step_name, self.token, seq, state.value, encode_fields(fields)],
        )
        outcome = BeginOutcome(reply[0])
        if outcome is BeginOutcome.LOST:
            raise CheckpointLost(f"step {self.step_name!r} lost its claim before sub-step {seq}")
        if outcome is BeginOutcome.GAP:
            raise CheckpointLost(f"step {self.step_name!r}: sub-step {seq} is beyond the {reply[1]} recorded")
        was = SubStepState(reply[2]) if outcome is BeginOutcome.TAKEN else None
        return outcome, SubStep.decode(reply[1]), was

    async def end(
        self, seq: int, state: SubStepState, fields: dict[str, Any], *, consume_input: bool = False
    ) -> SubStep:
        k = self._keys
        reply = await self._scripts["agent_checkpoint_end"](
            keys=[k.token, k.agents, k.human_input],
            args=[
                self.step_name,
                self.token,
                seq,
                state.value,
                encode_fields(fields),
                "1" if consume_input else "0",
            ],
        )
        code = int(reply[0])
        if code == 0:
            raise CheckpointLost(f"step {self.step_name!r} lost its claim before ending sub-step {seq}")
        if code == -1:
            raise CheckpointLost(f"step {self.step_name!r} has no sub-step {seq} to end")
        return SubStep.decode(reply[1])


async def read_sub_steps(store: DagStore, execution_id: str, step_name: str) -> list[SubStep]:
    """Every recorded sub-step of an agent step, in order (empty for any other step)."""
    key = store.keys(execution_id).agents
    redis = store.hot_state.redis
    count = int(await redis.hget(key, f"{step_name}:n") or 0)
    if count == 0:
        return []
    raws = await redis.hmget(key, [f"{step_name}:{seq}" for seq in range(count)])
    return [SubStep.decode(raw) for raw in raws if raw is not None]
