"""StepDescription: what the runtime publishes about one registered step type.

Owns the published shape (key, where it came from, description, the JSON Schema of its
config as pipeline JSON spells it, the schema of the human input it may wait for, and the
`retry` section it uses when a step's config has none),
served by the `steps.list` MCP tool, the `step://{key}` resource and `mcp-runtime steps`. Must not validate
configs: the submit-time check does.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime_core.steps.api._definition import config_model_of, default_retry_of, description_of

BUILTIN_SOURCE = "builtin"


class StepDescription(BaseModel):
    model_config = ConfigDict(frozen=True)

    step_key: str
    source: str
    description: str
    config_schema: dict[str, Any]
    input_schema: dict[str, Any] | None = None
    default_retry: dict[str, Any] | None = None


def describe_step(executor: Any, source: str) -> StepDescription:
    schema = getattr(executor, "input_schema", None)
    return StepDescription(
        step_key=executor.step_key,
        source=source,
        description=description_of(executor),
        config_schema=config_model_of(executor).model_json_schema(by_alias=True),
        input_schema=dict(schema) if schema is not None else None,
        default_retry=default_retry_of(executor),
    )
