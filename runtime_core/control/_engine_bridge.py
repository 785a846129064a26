"""attach_execution_control: connect a DagEngine's control hooks to the control store.

Owns the engine-side control transitions: park a step for human input (WaitForInput), read
submitted input back for the waiting step, and settle Pausing -> Paused / Resuming ->
Running when the engine observes it. No tenant check here: the engine already holds the
execution it advances. Must not claim or complete steps.
"""

from __future__ import annotations

from typing import Any

from runtime_core.control._models import ControlAction, ControlStatus, RuntimeAction
from runtime_core.control._service import ExecutionControlService
from runtime_core.control._store import ANY_VERSION, CasOutcome, ControlStore
from runtime_core.control._transitions import raise_for_result
from runtime_core.dag import DagEngine, EngineEvent, StepClaim
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.steps import StepParked

_SETTLE_ACTION = {ControlStatus.PAUSING: RuntimeAction.DRAIN, ControlStatus.RESUMING: RuntimeAction.ADVANCE}


class EngineControlBridge:
    """The callables `attach_execution_control` installs on the engine."""

    def __init__(self, store: ControlStore) -> None:
        self.store = store

    async def park(
        self, claim: StepClaim, parked: StepParked, snapshot: ExecutionContextSnapshot | None
    ) -> None:
        """WaitForInput for the parked step; ConflictError when control forbids it now."""
        result = await self.store.apply(
            claim.execution_id,
            ControlAction.WAIT_FOR_INPUT.value,
            expected_version=ANY_VERSION,  # one call: the transition table alone decides
            waiting_key=parked.waiting_key,
            waiting_step=claim.step_name,
            reason=parked.prompt,
        )
        raise_for_result(result, claim.execution_id, ControlAction.WAIT_FOR_INPUT)

    async def read_input(self, execution_id: str, step_name: str) -> dict[str, Any] | None:
        return await self.store.read_input(execution_id, step_name)

    async def settle(self, execution_id: str, observed: str) -> str | None:
        """Pausing -> Paused (nothing running) or Resuming -> Running; the new status, or None."""
        action = _SETTLE_ACTION.get(ControlStatus(observed))
        if action is None:
            return None
        result = await self.store.apply(execution_id, action.value, expected_version=ANY_VERSION)
        if result.outcome is not CasOutcome.APPLIED:
            return None
        assert result.state is not None
        return result.state.status.value


class _EngineObserver:
    """Sends control events through whatever observer the engine has at that moment."""

    def __init__(self, engine: DagEngine) -> None:
        self._engine = engine

    async def on_event(self, event: EngineEvent) -> None:
        await self._engine.observer.on_event(event)


def attach_execution_control(engine: DagEngine, service: ExecutionControlService) -> EngineControlBridge:
    """Install park / human-input / settle hooks on `engine`; control events go to its observer."""
    bridge = EngineControlBridge(service.store)
    engine.on_park = bridge.park
    engine.read_human_input = bridge.read_input
    engine.settle_control = bridge.settle
    if service.observer is None:
        service.observer = _EngineObserver(engine)
    return bridge
