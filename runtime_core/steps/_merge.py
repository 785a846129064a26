"""The `rag.merge` executor: combine upstream step results into one keyed structure.

Reads `inputs[<source step name>]` for every name in `config.sourceSteps` (the engine binds
each source step as `steps.<name>.result` when the step has no explicit input of that name).
Without `sourceSteps` it merges every input. Must not reach into engine state directly.
"""

from __future__ import annotations

from typing import Any

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._results import step_result, unwrap_result


class MergeConfig(StepConfig):
    source_steps: list[str] | None = None


class RagMergeExecutor:
    """Result `data` maps each source name to that source's `data`; keys sorted, values canonical."""

    step_key = "rag.merge"
    config_model = MergeConfig
    description = "Combine upstream step results into one structure keyed by source step name."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(MergeConfig, invocation)
        sources = config.source_steps if config.source_steps is not None else sorted(invocation.inputs)
        missing = [name for name in sources if name not in invocation.inputs]
        if missing:
            raise StepFailure(
                f"merge step {invocation.step_name!r} has no input for source steps {missing}; "
                "bind them with `steps.<name>.result` or list only completed dependencies",
                code="permanent",
            )
        merged = {name: unwrap_result(invocation.inputs[name]) for name in sources}
        return step_result(merged, sources=list(sources))
