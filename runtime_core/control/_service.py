"""ExecutionControlService: pause, resume, cancel, wait for input and submit input by ExecutionId.

Owns the caller-facing control operations: each checks the caller's tenant against the
execution's stored snapshot (a foreign tenant gets the same NotFoundError as an unknown id),
applies one CAS action and reports it as an engine event for the ledger. Must not claim,
run or complete steps; the engine settles Pausing -> Paused and Resuming -> Running.
"""

from __future__ import annotations

from typing import Any

from runtime_core.control._models import ControlAction, ControlState
from runtime_core.control._store import ControlStore
from runtime_core.control._transitions import apply_action, not_found, raise_for_result
from runtime_core.dag import DagStore, EngineEvent, ExecutionMeta, ExecutionObserver, FinalizeOutcome
from runtime_core.errors import NotFoundError
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import check_size, dumps_strict

MAX_INPUT_BYTES = 256 * 1024

_EVENT_BY_ACTION: dict[ControlAction, str] = {
    ControlAction.PAUSE: "execution.pause_requested",
    ControlAction.RESUME: "execution.resume_requested",
    ControlAction.CANCEL: "execution.cancel_requested",
    ControlAction.WAIT_FOR_INPUT: "execution.waiting_for_input",
    ControlAction.SUBMIT_INPUT: "execution.input_submitted",
}


class ExecutionControlService:
    """Durable, versioned execution control (Layer 2: ExecutionId control).

    Every method takes an optional `expected_version`: given, a concurrent change is a
    ConflictError; omitted, the service re-reads and retries the CAS.
    """

    def __init__(self, hot_state: HotState, *, observer: ExecutionObserver | None = None) -> None:
        self.store = ControlStore(DagStore(hot_state))
        self.observer = observer

    async def get(self, execution_id: str, snapshot: ExecutionContextSnapshot) -> ControlState:
        """The current control state (status None / version 0 until the first action)."""
        await self._visible_meta(execution_id, snapshot)
        return await self.store.read(execution_id)

    async def pause(
        self,
        execution_id: str,
        snapshot: ExecutionContextSnapshot,
        *,
        reason: str = "",
        expected_version: int | None = None,
    ) -> ControlState:
        """Block new claims; Pausing while claimed steps drain, then Paused."""
        return await self._act(execution_id, snapshot, ControlAction.PAUSE, reason, expected_version)

    async def resume(
        self,
        execution_id: str,
        snapshot: ExecutionContextSnapshot,
        *,
        reason: str = "",
        expected_version: int | None = None,
    ) -> ControlState:
        """Pausing/Paused -> Resuming; the engine marks it Running when work advances again."""
        return await self._act(execution_id, snapshot, ControlAction.RESUME, reason, expected_version)

    async def cancel(
        self,
        execution_id: str,
        snapshot: ExecutionContextSnapshot,
        *,
        reason: str = "",
        expected_version: int | None = None,
    ) -> ControlState:
        """Block new claims and finalize as Cancelled once claimed steps drain (at once if none)."""
        state = await self._act(execution_id, snapshot, ControlAction.CANCEL, reason, expected_version)
        outcome, status, at_ms = await self.store.dag_store.finalize(execution_id)
        if outcome is not FinalizeOutcome.FINALIZED:
            return state
        meta = await self.store.load_meta(execution_id)
        if meta is not None:
            await self._emit("execution.finalized", meta, None, snapshot, at_ms=at_ms, status=status)
        return await self.store.read(execution_id)

    async def wait_for_input(
        self,
        execution_id: str,
        step_name: str,
        waiting_key: str,
        snapshot: ExecutionContextSnapshot,
        *,
        prompt: str = "",
        expected_version: int | None = None,
    ) -> ControlState:
        """Block claims until input arrives under `waiting_key` for `step_name`."""
        meta = await self._visible_meta(execution_id, snapshot)
        if step_name not in {step.name for step in meta.pipeline.steps}:
            raise NotFoundError(
                f"Execution '{execution_id}' has no step '{step_name}'.",
                hint="Name a step of the execution's pipeline.",
            )
        _, result = await apply_action(
            self.store,
            execution_id,
            ControlAction.WAIT_FOR_INPUT,
            expected_version=expected_version,
            waiting_key=waiting_key,
            waiting_step=step_name,
            reason=prompt,
        )
        raise_for_result(result, execution_id, ControlAction.WAIT_FOR_INPUT)
        assert result.state is not None
        await self._reported(
            result.state, result.now_ms, meta, ControlAction.WAIT_FOR_INPUT, snapshot, step_name
        )
        return result.state

    async def submit_input(
        self,
        execution_id: str,
        waiting_key: str,
        payload: dict[str, Any],
        snapshot: ExecutionContextSnapshot,
        *,
        expected_version: int | None = None,
    ) -> ControlState:
        """Store `payload` for the waiting step (only under its waiting key) and resume."""
        check_size(len(dumps_strict(payload, "Human input")), MAX_INPUT_BYTES, "Human input")
        meta = await self._visible_meta(execution_id, snapshot)
        before, result = await apply_action(
            self.store,
            execution_id,
            ControlAction.SUBMIT_INPUT,
            expected_version=expected_version,
            waiting_key=waiting_key,
            payload=payload,
        )
        raise_for_result(result, execution_id, ControlAction.SUBMIT_INPUT, given_key=waiting_key)
        assert result.state is not None
        await self._reported(
            result.state,
            result.now_ms,
            meta,
            ControlAction.SUBMIT_INPUT,
            snapshot,
            before.waiting_step,
            waiting_key=waiting_key,
            input=payload,
        )
        return result.state

    async def _act(
        self,
        execution_id: str,
        snapshot: ExecutionContextSnapshot,
        action: ControlAction,
        reason: str,
        expected_version: int | None,
    ) -> ControlState:
        meta = await self._visible_meta(execution_id, snapshot)
        _, result = await apply_action(
            self.store, execution_id, action, expected_version=expected_version, reason=reason
        )
        raise_for_result(result, execution_id, action)
        assert result.state is not None
        await self._reported(result.state, result.now_ms, meta, action, snapshot, None)
        return result.state

    async def _reported(
        self,
        state: ControlState,
        at_ms: int,
        meta: ExecutionMeta,
        action: ControlAction,
        caller: ExecutionContextSnapshot,
        step_name: str | None,
        **attributes: Any,
    ) -> None:
        attributes.setdefault("waiting_key", state.waiting_key)
        await self._emit(
            _EVENT_BY_ACTION[action],
            meta,
            step_name,
            caller,
            at_ms=at_ms,
            status=state.status.value,
            version=state.version,
            reason=state.reason,
            **attributes,
        )

    async def _visible_meta(self, execution_id: str, snapshot: ExecutionContextSnapshot) -> ExecutionMeta:
        meta = await self.store.load_meta(execution_id)
        if meta is None or meta.snapshot is None or meta.snapshot.tenant_id != snapshot.tenant_id:
            raise not_found(execution_id)
        return meta

    async def _emit(
        self,
        name: str,
        meta: ExecutionMeta,
        step_name: str | None,
        caller: ExecutionContextSnapshot,
        *,
        at_ms: int = 0,
        **attributes: Any,
    ) -> None:
        if self.observer is None:
            return
        attributes["requested_by"] = caller.user_id
        await self.observer.on_event(
            EngineEvent(name, meta.execution_id, meta.snapshot, step_name, None, at_ms, attributes, meta)
        )
