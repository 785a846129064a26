"""Applying one control action: optimistic version retry and the caller-facing error mapping.

Owns `apply_action` (read version -> CAS, re-read on a concurrent change) and
`raise_for_result` (CAS outcome -> NotFoundError / ConflictError saying what to do next).
Must not check tenants: callers do that before applying anything.
"""

from __future__ import annotations

from typing import Any

from runtime_core.control._models import ControlAction, ControlState, ControlStatus, RuntimeAction
from runtime_core.control._store import CasOutcome, CasResult, ControlStore
from runtime_core.errors import ConflictError, NotFoundError

MAX_VERSION_RETRIES = 8

_NEXT_STEP_BY_STATUS: dict[ControlStatus, str] = {
    ControlStatus.NONE: "It is running: pause or cancel it, or wait for it to finish.",
    ControlStatus.RUNNING: "It is running: pause or cancel it, or wait for it to finish.",
    ControlStatus.PAUSING: "Its running steps are draining before it pauses: resume or cancel it.",
    ControlStatus.PAUSED: "It is paused: resume or cancel it.",
    ControlStatus.RESUMING: "It is resuming: pause or cancel it, or wait for it to finish.",
    ControlStatus.CANCELLING: "It is being cancelled; wait for it to finalize as Cancelled.",
    ControlStatus.CANCELLED: "It was cancelled; start a new run instead.",
}


def not_found(execution_id: str) -> NotFoundError:
    """The one answer for an unknown id and a foreign tenant's id alike."""
    return NotFoundError(f"Execution '{execution_id}' not found.", hint="Check the ExecutionId.")


async def apply_action(
    store: ControlStore,
    execution_id: str,
    action: ControlAction | RuntimeAction,
    *,
    expected_version: int | None = None,
    **fields: Any,
) -> tuple[ControlState, CasResult]:
    """CAS `action` against the state it read; without an expected version, retry on a race.

    Returns the state the CAS was checked against (its version matched) and the result.
    """
    for _ in range(MAX_VERSION_RETRIES):
        before = await store.read(execution_id)
        version = before.version if expected_version is None else expected_version
        result = await store.apply(execution_id, action.value, expected_version=version, **fields)
        if result.outcome is not CasOutcome.VERSION_MISMATCH or expected_version is not None:
            break
    return before, result


def raise_for_result(
    result: CasResult, execution_id: str, action: ControlAction, given_key: str = ""
) -> None:
    """Raise the typed error for a refused action; return quietly when it was applied."""
    if result.outcome in (CasOutcome.APPLIED, CasOutcome.UNCHANGED):
        return
    if result.outcome is CasOutcome.EXECUTION_MISSING:
        raise not_found(execution_id)
    if result.outcome is CasOutcome.EXECUTION_TERMINAL:
        raise ConflictError(
            f"Cannot {action.value} execution '{execution_id}': it already finished as "
            f"{result.execution_status}.",
            hint="A finished execution cannot be controlled; submit a new run or replay it.",
        )
    state = result.state or ControlState(execution_id=execution_id)
    if result.outcome is CasOutcome.VERSION_MISMATCH:
        raise ConflictError(
            f"Cannot {action.value} execution '{execution_id}': its control state changed "
            f"(now version {state.version}, status {state.status.value}).",
            hint="Read the current control state and retry with its version.",
        )
    if result.outcome is CasOutcome.WAITING_KEY_MISMATCH:
        raise ConflictError(
            f"Execution '{execution_id}' is waiting for input under key '{state.waiting_key}', "
            f"not '{given_key}'; nothing was stored.",
            hint=f"Submit the input with waiting key '{state.waiting_key}'.",
        )
    raise ConflictError(
        f"Cannot {action.value} execution '{execution_id}': its control status is {state.status.value}.",
        hint=_next_step(state),
    )


def _next_step(state: ControlState) -> str:
    if state.status is ControlStatus.WAITING_FOR_INPUT:
        return (
            f"It is waiting for input under key '{state.waiting_key}' (step '{state.waiting_step}'): "
            "submit that input or cancel it."
        )
    return _NEXT_STEP_BY_STATUS[state.status]
