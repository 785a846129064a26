"""The `rag.compose` executor: turn merged data into a stable text context plus a structured object.

Owns the deterministic composer: sorted keys, no timestamps, no randomness, so equal inputs
give byte-identical results whatever order they arrived in. Must not call any provider.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._results import canonical, sha256_hex, step_result, unwrap_result


class ComposeConfig(StepConfig):
    source_step: str | None = None
    composer: Literal["deterministic"] = "deterministic"


class RagComposeExecutor:
    """Reads `inputs[config.sourceStep]` (or all inputs when no source step is configured)."""

    step_key = "rag.compose"
    config_model = ComposeConfig
    description = "Turn merged data into a stable text context plus the structured object (deterministic)."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(ComposeConfig, invocation)
        structured = canonical(_source(invocation, config.source_step))
        context = _render_context(structured)
        return step_result(
            {"context": context, "sections": _sections(structured), "structured": structured},
            composer=config.composer,
            contextSha256=sha256_hex(context),
        )


def _source(invocation: StepInvocation, source_step: str | None) -> Any:
    if source_step is None:
        return {name: unwrap_result(value) for name, value in invocation.inputs.items()}
    if source_step not in invocation.inputs:
        raise StepFailure(
            f"compose step {invocation.step_name!r} has no input {source_step!r}; "
            f"bind it with `steps.{source_step}.result`",
            code="permanent",
        )
    return unwrap_result(invocation.inputs[source_step])


def _sections(structured: Any) -> list[str]:
    return list(structured) if isinstance(structured, dict) else []


def _render_context(structured: Any) -> str:
    if not isinstance(structured, dict):
        return "\n".join(_lines("value", structured))
    blocks = []
    for section, body in structured.items():
        lines = _lines("", body) if isinstance(body, dict | list) else _lines("value", body)
        blocks.append("\n".join([f"## {section}", *lines]))
    return "\n\n".join(blocks)


def _lines(path: str, value: Any) -> list[str]:
    if isinstance(value, dict):
        return [line for key, item in value.items() for line in _lines(_join(path, key), item)]
    if isinstance(value, list) and all(not isinstance(item, dict | list) for item in value):
        return [f"{path or 'items'}: {', '.join(_scalar(item) for item in value)}"]
    if isinstance(value, list):
        return [line for index, item in enumerate(value) for line in _lines(f"{path}[{index}]", item)]
    return [f"{path}: {_scalar(value)}"]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
