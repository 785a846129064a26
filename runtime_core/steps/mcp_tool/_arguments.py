"""A `mcp.tool` step's arguments against its tool's input schema, at submit and before the call.

Owns the two checks: at submit the step's `input` is partly known (literals are values,
bindings are only names), so every required argument must be given (as a literal or a
binding), no argument may be unknown to a closed schema, and each literal must fit its
property's schema; before the call the resolved arguments must fit the whole schema. Must not
call servers.
"""

from __future__ import annotations

from typing import Any

from runtime_core.pipeline import is_binding
from runtime_core.steps._schemas import schema_problems


def submit_problems(schema: dict[str, Any], step_input: dict[str, Any]) -> str | None:
    """What the step's `input` cannot satisfy in `schema`, as far as submit can tell; None if nothing."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    missing = sorted(set(schema.get("required") or []) - set(step_input))
    if missing:
        return f"missing required argument(s) {', '.join(missing)}"
    if schema.get("additionalProperties") is False:
        unknown = sorted(set(step_input) - set(properties))
        if unknown:
            return (
                f"unknown argument(s) {', '.join(unknown)} (the tool takes: {', '.join(sorted(properties))})"
            )
    literals = {name: value for name, value in step_input.items() if not is_binding(value)}
    known = {name: properties[name] for name in literals if name in properties}
    partial = {key: value for key, value in schema.items() if key in ("$defs", "definitions", "$schema")}
    return schema_problems({**partial, "type": "object", "properties": known}, literals)


def call_problems(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """What the resolved `arguments` do not satisfy in `schema`; None when they fit."""
    return schema_problems(schema, arguments)
