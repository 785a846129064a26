"""The operations journal of one claimed step: `OperationJournal` over the execution's hot state.

Owns the typed wrappers of `operation_begin.lua` / `operation_settle.lua` (the only place that
knows their KEYS/ARGV order), fenced by the step's claim token, the ledger events of an
operation (`step.operation_started`, `step.operation_uncertain`, `step.operation_settled`),
reading the operations a released step left in doubt (recovery reports them), and putting back
an operation the durable ledger says was started when an execution is restored after Redis
lost its dataset (`operation_restore.lua`). Must not
decide a policy (`runtime_core.steps.operations.guarded_call` does) nor call any peer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from runtime_core.dag._keys import ExecutionKeys
from runtime_core.dag._records import StepClaim
from runtime_core.dag._store import DagStore
from runtime_core.steps.operations import (
    OperationRecord,
    OperationStart,
    OperationState,
    StartOutcome,
    UncertaintyPolicy,
    new_operation_id,
)

OperationEvent = Callable[..., Awaitable[None]]
"""`emit(event_name, **attributes)`: an engine event of the claimed step (it reaches the ledger)."""

IN_DOUBT_STATES = frozenset({OperationState.STARTED, OperationState.UNCERTAIN})


class ClaimOperations:
    """The `OperationJournal` the engine gives one claimed step (`StepInvocation.operations`)."""

    def __init__(self, store: DagStore, claim: StepClaim, emit: OperationEvent) -> None:
        self._store = store
        self._claim = claim
        self._emit = emit

    @property
    def _scripts(self) -> Any:
        return self._store.hot_state.scripts

    @property
    def _keys(self) -> ExecutionKeys:
        """Looked up once an operation is journalled (one journal is made per step; most
        steps journal nothing)."""
        return self._store.keys(self._claim.execution_id)

    async def begin(self, name: str, *, policy: UncertaintyPolicy) -> OperationStart:
        k, claim = self._keys, self._claim
        reply = await self._scripts["operation_begin"](
            keys=[k.token, k.operations], args=[claim.step_name, name, claim.token, new_operation_id()]
        )
        outcome = StartOutcome(reply[0])
        if outcome is StartOutcome.LOST:
            return OperationStart(outcome=outcome, name=name)
        record = OperationRecord.model_validate_json(reply[1])
        newly = outcome is StartOutcome.UNCERTAIN and int(reply[2]) == 1
        start = OperationStart(outcome=outcome, name=name, record=record, newly_uncertain=newly)
        if outcome is StartOutcome.FRESH:
            await self._emit(
                "step.operation_started", operation=name, operation_id=record.id, attempt=record.attempts
            )
        elif newly:
            await self._emit(
                "step.operation_uncertain",
                operation=name,
                operation_id=record.id,
                policy=policy.value,
                call_started_at_ms=record.started_at_ms,
                uncertain_count=record.uncertain_count,
            )
        return start

    async def settle(
        self, name: str, state: OperationState, settled_by: str, *, consume_input: bool = False
    ) -> None:
        k, claim = self._keys, self._claim
        reply = await self._scripts["operation_settle"](
            keys=[k.token, k.operations, k.human_input],
            args=[claim.step_name, name, claim.token, state.value, settled_by, "1" if consume_input else "0"],
        )
        if int(reply[0]) != 1:
            return  # the claim was lost: the step's transition will be refused as well
        record = OperationRecord.model_validate_json(reply[1])
        if settled_by in ("answered", "answered_failure"):
            return  # the call's own outcome: the step's completion / failure event tells it
        await self._emit(
            "step.operation_settled",
            operation=name,
            operation_id=record.id,
            settled_by=settled_by,
            state=state.value,
        )


async def operations_in_doubt(
    store: DagStore, execution_id: str, step_names: Iterable[str]
) -> list[dict[str, Any]]:
    """`{step, operation, operation_id, state}` for each operation of `step_names` whose call may
    have taken effect (started or uncertain): what recovery reports for the steps it released."""
    names = list(step_names)
    if not names:
        return []
    raws = await store.hot_state.redis.hmget(store.keys(execution_id).operations, names)
    found = []
    for step_name, raw in zip(names, raws, strict=True):
        for name, fields in sorted(json.loads(raw).items()) if raw else ():
            record = OperationRecord.model_validate(fields)
            if record.state in IN_DOUBT_STATES:
                found.append(
                    {
                        "step": step_name,
                        "operation": name,
                        "operation_id": record.id,
                        "state": record.state.value,
                    }
                )
    return found


async def restore_operation(
    store: DagStore,
    execution_id: str,
    step_name: str,
    name: str,
    operation_id: str,
    *,
    attempts: int,
    started_at_ms: int,
) -> bool:
    """Record operation `name` of `step_name` as started under no claim (its next claim finds it
    uncertain); False when the execution already has it (or does not exist)."""
    k = store.keys(execution_id)
    reply = await store.hot_state.scripts["operation_restore"](
        keys=[k.meta, k.operations], args=[step_name, name, operation_id, attempts, started_at_ms]
    )
    return int(reply) == 1
