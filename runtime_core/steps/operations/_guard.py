"""`guarded_call`: one call to a peer that may have taken effect, under an uncertainty policy.

Owns the sequence every step with a side effect follows: begin the operation (its id is
recorded before anything goes out), settle an earlier claim's uncertain call by the declared
policy (retry with the same id, reconcile through the peer's status operation, fail, or park
for a human decision), make the call, and record a definite failure so the next attempt may
call afresh. A call whose outcome is unknown (timeout, connection lost, the process killed)
leaves the operation started: the next claim finds it uncertain. Must not know any peer's
protocol: the step passes `call` / `reconcile`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from runtime_core.policy import UNCERTAIN_FAILURE_CODE
from runtime_core.steps._executor import StepFailure, StepInvocation, StepParked
from runtime_core.steps.operations._models import (
    Decision,
    OperationStart,
    OperationState,
    StartOutcome,
    UncertaintyPolicy,
    new_operation_id,
)

T = TypeVar("T")


class OutcomeUnknown(Exception):
    """Raised by a guarded call that may have reached the peer without an answer (a read timeout,
    a connection lost mid-request): `failure` is reported, the operation stays in doubt."""

    def __init__(self, failure: StepFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def uncertain_waiting_key(step_name: str) -> str:
    """The waiting key of a step parked by the `ask` policy (input.submit answers under it)."""
    return f"{step_name}.uncertain"


async def guarded_call(
    invocation: StepInvocation,
    name: str,
    policy: UncertaintyPolicy,
    call: Callable[[str], Awaitable[T]],
    *,
    reconcile: Callable[[str], Awaitable[T | None]] | None = None,
    from_decision: Callable[[Decision], T] | None = None,
    settle_done: bool = False,
    peer: str = "the peer",
) -> T:
    """`call(operation_id)`'s result, made at most once per claim and never twice silently.

    `call` raises StepFailure when the peer answered with a failure (definite: recorded, the
    next attempt may call again) or OutcomeUnknown when it may have acted. `reconcile(id)`
    (policy reconcile) returns the call's outcome when the peer has it, None when the peer
    never saw the operation. `from_decision` turns a human's `done` answer into the result.
    `settle_done`: record the operation done after the call (a step making several calls, such
    as an agent; a one-call step completes instead). Outside the engine (no journal) the call
    simply goes out under a fresh id.
    """
    journal = invocation.operations
    if journal is None:
        return await _call(call, new_operation_id())
    start = await journal.begin(name, policy=policy)
    if start.outcome is StartOutcome.LOST:
        raise StepFailure(
            f"step {invocation.step_name!r} lost its claim before calling {peer}: not called",
            code="transient",
        )
    if start.outcome is StartOutcome.DONE:
        raise StepFailure(
            f"operation {start.operation_id} of step {invocation.step_name!r} completed under an earlier "
            f"attempt whose result was not kept: {peer} is not called again",
            code=UNCERTAIN_FAILURE_CODE,
        )
    if start.outcome is StartOutcome.UNCERTAIN:
        settled = await _settle_uncertain(invocation, start, policy, reconcile, from_decision, peer)
        if settled is not _CALL:
            return settled  # type: ignore[return-value]
    try:
        result = await _call(call, start.operation_id)
    except StepFailure:
        await journal.settle(name, OperationState.FAILED, "answered_failure")
        raise
    if settle_done:
        await journal.settle(name, OperationState.DONE, "answered")
    return result


async def _call(call: Callable[[str], Awaitable[T]], operation_id: str) -> T:
    try:
        return await call(operation_id)
    except OutcomeUnknown as unknown:
        raise unknown.failure from unknown


class _CallMarker:
    pass


_CALL: Any = _CallMarker()


async def _settle_uncertain(
    invocation: StepInvocation,
    start: OperationStart,
    policy: UncertaintyPolicy,
    reconcile: Callable[[str], Awaitable[Any]] | None,
    from_decision: Callable[[Decision], Any] | None,
    peer: str,
) -> Any:
    """The result that settles the doubt, or _CALL when the call is to go out (again)."""
    journal, name, operation_id = invocation.operations, start.name, start.operation_id
    assert journal is not None
    what = f"operation {operation_id} of step {invocation.step_name!r}"
    if policy is UncertaintyPolicy.RETRY:
        await journal.settle(name, OperationState.STARTED, "retried")
        return _CALL
    if policy is UncertaintyPolicy.RECONCILE:
        if reconcile is None:
            raise StepFailure(f"{what} is uncertain and no status operation is declared", code="permanent")
        found = await reconcile(operation_id)
        if found is None:
            await journal.settle(name, OperationState.STARTED, "reconciled_not_found")
            return _CALL
        await journal.settle(name, OperationState.DONE, "reconciled_found")
        return found
    if policy is UncertaintyPolicy.FAIL:
        await journal.settle(name, OperationState.UNCERTAIN, "failed")
        raise _refused(what, peer, "the step declares onUncertain=fail")
    return await _ask(invocation, start, what, peer, from_decision)


async def _ask(
    invocation: StepInvocation,
    start: OperationStart,
    what: str,
    peer: str,
    from_decision: Callable[[Decision], Any] | None,
) -> Any:
    journal = invocation.operations
    assert journal is not None
    decision = _decision(invocation.human_input)
    if decision is None:
        raise StepParked(
            uncertain_waiting_key(invocation.step_name),
            prompt=f"{what} may have taken effect at {peer} before its process stopped. Answer "
            '{"decision": "retry"} to call again with the same operation id, {"decision": "fail"}, '
            'or {"decision": "done", "result": ...} if it took effect.',
        )
    if decision.decision == "retry":
        await journal.settle(start.name, OperationState.STARTED, "human_retry", consume_input=True)
        return _CALL
    if decision.decision == "fail":
        await journal.settle(start.name, OperationState.UNCERTAIN, "human_fail", consume_input=True)
        raise _refused(what, peer, "a human answered fail")
    await journal.settle(start.name, OperationState.DONE, "human_done", consume_input=True)
    return from_decision(decision) if from_decision is not None else decision.result


def _decision(human_input: dict[str, Any] | None) -> Decision | None:
    if human_input is None:
        return None
    try:
        return Decision.model_validate(human_input)
    except ValidationError:
        return None  # not an answer to this question: ask again


def _refused(what: str, peer: str, why: str) -> StepFailure:
    return StepFailure(
        f"{what} may have taken effect at {peer}; {why}: not called again. Check {peer} for this "
        "operation id before running it again.",
        code=UNCERTAIN_FAILURE_CODE,
    )
