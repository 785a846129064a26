"""The vocabulary of operations: ids, states, uncertainty policies and the journal protocol.

Owns `UncertaintyPolicy` (what a step declares for an attempt whose call may have taken
effect), `OperationState` and `OperationRecord` (what the hot state keeps per operation),
`OperationStart` (what `begin` answers), the human decision schema, and `OperationJournal`,
the protocol the DAG engine implements for one claimed step. Must not touch Redis nor raise
step failures: the engine's journal and `guarded_call` do.
"""

from __future__ import annotations

import secrets
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

OPERATION_PREFIX = "op_"


def new_operation_id() -> str:
    return OPERATION_PREFIX + secrets.token_hex(12)


class UncertaintyPolicy(StrEnum):
    """What settles an attempt whose call may have taken effect before its process died.

    retry: call again with the same operation id (the peer deduplicates by it);
    reconcile: ask the peer's declared status operation whether it happened, call again only
    when it did not; fail: fail the step, never call again; ask: park the step until a human
    answers retry / fail / done.
    """

    RETRY = "retry"
    RECONCILE = "reconcile"
    FAIL = "fail"
    ASK = "ask"


class OperationState(StrEnum):
    STARTED = "started"  # a call may be in flight under the claim that recorded it
    UNCERTAIN = "uncertain"  # the call of an earlier claim may have taken effect
    DONE = "done"  # the call took effect and its outcome is kept by the step
    FAILED = "failed"  # the peer answered with a failure: nothing took effect, a call may go out


class StartOutcome(StrEnum):
    FRESH = "fresh"  # go ahead: the call goes out under `operation_id`
    UNCERTAIN = "uncertain"  # an earlier claim's call may have taken effect: the policy decides
    DONE = "done"  # settled as done under an earlier claim
    LOST = "lost"  # this claim no longer owns the step: do not call


class OperationRecord(BaseModel):
    """One operation of one step of one execution, as the hot state keeps it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    state: OperationState
    attempts: int = 1
    started_at_ms: int = 0
    uncertain_count: int = 0
    uncertain_since_ms: int | None = None
    settled_by: str | None = None


class OperationStart(BaseModel):
    """`begin`'s answer; `newly_uncertain` is True only for the claim that found the doubt first."""

    model_config = ConfigDict(frozen=True)

    outcome: StartOutcome
    name: str
    record: OperationRecord | None = None
    newly_uncertain: bool = False

    @property
    def operation_id(self) -> str:
        return self.record.id if self.record is not None else ""


@runtime_checkable
class OperationJournal(Protocol):
    """The operations of one claimed step (`StepInvocation.operations`), recorded in the execution's
    hot state through Lua transitions fenced by the step's claim token."""

    async def begin(self, name: str, *, policy: UncertaintyPolicy) -> OperationStart:
        """Record operation `name` (a new id, or the one kept) before its call goes out."""
        ...

    async def settle(
        self, name: str, state: OperationState, settled_by: str, *, consume_input: bool = False
    ) -> None:
        """Record `state`; `consume_input` drops the step's stored human input (a decision used)."""
        ...


HumanDecision = Literal["retry", "fail", "done"]

DECISION_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "enum": ["retry", "fail", "done"],
            "title": "Decision",
            "description": "retry: call the peer again with the same operation id; fail: fail the step; "
            "done: the call took effect (give its result).",
        },
        "result": {"title": "Result", "description": "With done: the result the call produced."},
        "comment": {"type": "string", "title": "Comment", "description": "A note kept in the ledger."},
    },
    "required": ["decision"],
}
"""The human input a step parked by the `ask` policy expects (input.submit)."""


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    decision: HumanDecision
    result: Any = None
    comment: str = ""
