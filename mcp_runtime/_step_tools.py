"""Tool `steps.list`: the registered step types (built-in and plug-in) and their config schemas.

Owns shaping step descriptions into the tool answer. Must not register or load steps: the
descriptions come from the running engine's executor registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp_runtime._inputs import StepsListInput
from mcp_runtime._outputs import StepsListOutput, StepTypeInfo
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.errors import NotFoundError
from runtime_core.steps import StepDescription


class StepTools:
    def __init__(self, describe_steps: Callable[[], list[StepDescription]]) -> None:
        self._describe_steps = describe_steps

    async def list(self, request: StepsListInput, call: ToolCall) -> StepsListOutput:
        described = self._describe_steps()
        if request.step_key is not None:
            described = [d for d in described if d.step_key == request.step_key]
            if not described:
                raise NotFoundError(
                    f"No step type '{request.step_key}' is registered.",
                    hint="Call steps.list without step_key for the registered step types.",
                )
        return StepsListOutput(steps=[StepTypeInfo.model_validate(d.model_dump()) for d in described])

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="steps.list",
                title="List step types",
                description=(
                    "List the step types this server runs (built-in and plug-in): stepKey, where it comes "
                    "from, what it does, the JSON Schema of its `config` (submit and pipelines.validate "
                    "refuse a step whose config does not fit it, naming the field) and, for steps that "
                    "wait for a human, the schema of the input they expect."
                ),
                input_model=StepsListInput,
                output_model=StepsListOutput,
                handler=self.list,
                read_only=True,
                idempotent=True,
            )
        ]
