"""Tools `pause`, `resume` and `input.submit`: execution control by ExecutionId.

Owns shaping ExecutionControlService answers (the versioned control state) into tool
answers. Must not change control state itself: the service applies one CAS action per call
and checks the caller's tenant against the execution's stored snapshot.
"""

from __future__ import annotations

from typing import Any

from mcp_runtime._inputs import InputSubmitInput, PauseInput, ResumeInput
from mcp_runtime._outputs import ControlOutput
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.control import ControlState, ExecutionControlService


def control_output(state: ControlState) -> ControlOutput:
    return ControlOutput(
        execution_id=state.execution_id,
        control_status=state.status.value,
        action=state.action.value,
        version=state.version,
        waiting_key=state.waiting_key,
        waiting_step=state.waiting_step,
        reason=state.reason,
    )


class ControlTools:
    def __init__(self, control: ExecutionControlService) -> None:
        self._control = control

    async def pause(self, request: PauseInput, call: ToolCall) -> ControlOutput:
        return control_output(await self._control.pause(request.execution_id, call.snapshot))

    async def resume(self, request: ResumeInput, call: ToolCall) -> ControlOutput:
        return control_output(await self._control.resume(request.execution_id, call.snapshot))

    async def submit_input(self, request: InputSubmitInput, call: ToolCall) -> ControlOutput:
        state = await self._control.submit_input(
            request.execution_id, request.waiting_key, request.payload, call.snapshot
        )
        return control_output(state)

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="pause",
                title="Pause an execution",
                description=(
                    "Pause a running execution (by ExecutionId): no new steps are claimed, steps already "
                    "running finish, then control_status becomes Paused. Resume with `resume`; the result "
                    "is the same as an uninterrupted run."
                ),
                input_model=PauseInput,
                output_model=ControlOutput,
                handler=self.pause,
                read_only=False,
            ),
            ToolSpec(
                name="resume",
                title="Resume an execution",
                description=(
                    "Resume a Pausing or Paused execution (by ExecutionId): control_status becomes "
                    "Resuming, then Running once work advances again."
                ),
                input_model=ResumeInput,
                output_model=ControlOutput,
                handler=self.resume,
                read_only=False,
            ),
            ToolSpec(
                name="input.submit",
                title="Answer a human-input gate",
                description=(
                    "Give the human input an execution is waiting for (control_status WaitingForInput in "
                    "`run.status`). `waiting_key` must equal the execution's waiting key, otherwise the "
                    "input is refused and nothing is stored. The waiting step then reads `payload` and "
                    "the execution continues."
                ),
                input_model=InputSubmitInput,
                output_model=ControlOutput,
                handler=self.submit_input,
                read_only=False,
            ),
        ]
