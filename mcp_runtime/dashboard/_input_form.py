"""The human-input form of a waiting execution, built from the waiting step's input schema.

Owns turning a flat object schema (boolean, string, number and integer properties) into form
fields with labels, and the submitted form back into the payload `input.submit` takes
(typed as the schema says); any other schema is answered with one JSON text field. A
`human.approval` step (`approved` + `comment`) becomes a yes / no choice and a comment.
Must not submit anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime_core.errors import RuntimeCoreError

JSON_FIELD = "payload_json"
FIELD_PREFIX = "field_"
_SIMPLE = {"boolean", "string", "number", "integer"}


class InvalidFormError(RuntimeCoreError):
    code = "invalid_arguments"


@dataclass(frozen=True)
class FormField:
    name: str
    kind: str
    title: str
    description: str
    required: bool

    @property
    def input_name(self) -> str:
        return f"{FIELD_PREFIX}{self.name}"


def form_fields(schema: Mapping[str, Any]) -> list[FormField] | None:
    """The fields of a flat object schema; None when it is anything else (answer as JSON)."""
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, dict) or not properties:
        return None
    if any(not isinstance(p, dict) or p.get("type") not in _SIMPLE for p in properties.values()):
        return None
    required = set(schema.get("required") or ())
    return [
        FormField(
            name=name,
            kind=str(spec["type"]),
            title=str(spec.get("title") or name),
            description=str(spec.get("description") or ""),
            required=name in required,
        )
        for name, spec in properties.items()
    ]


def payload_from_form(schema: Mapping[str, Any], form: Mapping[str, str]) -> dict[str, Any]:
    fields = form_fields(schema)
    if fields is None:
        return _json_payload(form.get(JSON_FIELD, ""))
    payload: dict[str, Any] = {}
    for field in fields:
        raw = form.get(field.input_name, "").strip()
        if raw == "":
            if field.required:
                raise InvalidFormError(f"'{field.title}' is required.", hint="Fill it in and send again.")
            continue
        payload[field.name] = _typed(field, raw)
    return payload


def _typed(field: FormField, raw: str) -> Any:
    try:
        if field.kind == "boolean":
            return {"true": True, "false": False}[raw]
        if field.kind == "integer":
            return int(raw)
        if field.kind == "number":
            return float(raw)
    except (KeyError, ValueError):
        raise InvalidFormError(
            f"'{field.title}' must be a {field.kind}.", hint="Correct the value and send again."
        ) from None
    return raw


def _json_payload(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise InvalidFormError(f"The answer is not JSON ({exc.msg}).", hint="Send a JSON object.") from None
    if not isinstance(value, dict):
        raise InvalidFormError("The answer must be a JSON object.", hint="Send a JSON object, e.g. {}.")
    return value
