"""Checking a JSON value against a JSON schema, for the steps that take one from outside.

Owns the use of `jsonschema` for values (the dialect is the schema's `$schema`, Draft 2020-12
when absent) and the one-line report of what does not fit (paths and messages, the first few
problems). Must not raise step failures: callers choose the code.
"""

from __future__ import annotations

from typing import Any

from jsonschema import validators

MAX_REPORTED_PROBLEMS = 3


def schema_problems(schema: dict[str, Any], value: Any) -> str | None:
    """`path: message; ...` for the first problems of `value` under `schema`; None when it fits."""
    validator = validators.validator_for(schema)(schema)
    problems = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not problems:
        return None
    return "; ".join(
        f"{'/'.join(str(part) for part in e.absolute_path) or '(root)'}: {e.message}"
        for e in problems[:MAX_REPORTED_PROBLEMS]
    )
