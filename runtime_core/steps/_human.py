"""The `human.approval` executor: park until an operator answers, then report the answer.

Owns the mapping from config to the waiting key and prompt, and the JSON Schema of the
answer it expects (`input_schema`, shown to whoever is asked, e.g. an MCP task's input
request). Must not store or look up the input itself: the engine passes the submitted
answer as `invocation.human_input`.
"""

from __future__ import annotations

from typing import Any

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepInvocation, StepParked
from runtime_core.steps._results import step_result

APPROVAL_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve", "description": "true approves, false rejects."},
        "comment": {"type": "string", "title": "Comment", "description": "A note kept with the decision."},
    },
    "required": ["approved"],
}


class ApprovalConfig(StepConfig):
    waiting_key: str | None = None
    prompt: str = ""


class HumanApprovalExecutor:
    """Without input: raise StepParked (waiting key = `config.waitingKey` or the step name)."""

    step_key = "human.approval"
    config_model = ApprovalConfig
    description = "Wait for an operator's answer (input.submit under the waiting key), then report it."
    input_schema = APPROVAL_INPUT_SCHEMA

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(ApprovalConfig, invocation)
        answer = invocation.human_input
        if answer is None:
            raise StepParked(waiting_key=config.waiting_key or invocation.step_name, prompt=config.prompt)
        return step_result({"approved": bool(answer.get("approved")), "input": answer})
