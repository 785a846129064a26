"""Structured output: check a step's JSON schema at submit and a reply against it on return.

Owns the use of `jsonschema` (the dialect is the schema's `$schema`, Draft 2020-12 when
absent). A reply that is not JSON or does not validate is a retryable `invalid_output`
failure carrying the tokens it cost. Must not call providers.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import exceptions as schema_exceptions
from jsonschema import validators

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._schemas import schema_problems

INVALID_OUTPUT = "invalid_output"


def check_response_schema(schema: dict[str, Any]) -> None:
    """Raise ValueError naming the problem when `schema` is not a valid JSON schema."""
    try:
        validators.validator_for(schema).check_schema(schema)
    except schema_exceptions.SchemaError as error:
        raise ValueError(f"responseSchema is not a valid JSON schema: {error.message}") from None


def parse_structured_output(
    text: str, schema: dict[str, Any], *, what: str, usage: dict[str, Any] | None
) -> Any:
    """The reply `text` as JSON valid under `schema`, or an `invalid_output` StepFailure."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise StepFailure(f"{what} is not JSON: {error}", code=INVALID_OUTPUT, usage=usage) from None
    listed = schema_problems(schema, value)
    if listed is not None:
        raise StepFailure(f"{what} does not match responseSchema: {listed}", code=INVALID_OUTPUT, usage=usage)
    return value
