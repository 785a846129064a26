"""What every configured retrieval operation shares: bound inputs, JSON-safe rows, one-or-many results.

Owns looking up a configured operation by name, taking its named inputs from the step's
resolved inputs (only scalars or lists of scalars, so an input can never smuggle a query
fragment or an operator document), turning driver values (Decimal, datetime, UUID,
ObjectId, ...) into JSON values, and the `result: one | many` shape (`one` with no row is
`not_found`). Must not talk to a source.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from runtime_core.steps._executor import StepFailure

ResultShape = Literal["one", "many"]
SpecT = TypeVar("SpecT")
_SCALARS = (str, int, float, bool, type(None))


def operation_spec(source: str, operations: Mapping[str, SpecT], operation: str) -> SpecT:
    """The configured operation named `operation`; an unknown name is permanent, listing the known ones."""
    spec = operations.get(operation)
    if spec is None:
        known = ", ".join(sorted(operations)) or "none"
        raise StepFailure(f"{source} has no operation {operation!r} (known: {known})", code="permanent")
    return spec


def bound_values(operation: str, names: Iterable[str], params: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs `names` of `operation`, each a scalar or a list of scalars; else a permanent failure."""
    values: dict[str, Any] = {}
    for name in names:
        if name not in params:
            raise StepFailure(f"operation {operation!r} needs input {name!r}", code="permanent")
        value = params[name]
        if not _bindable(value):
            raise StepFailure(
                f"operation {operation!r}: input {name!r} must be a scalar or a list of scalars, "
                f"not {type(value).__name__}",
                code="permanent",
            )
        values[name] = value
    return values


def _bindable(value: Any) -> bool:
    if isinstance(value, list):
        return all(isinstance(item, _SCALARS) for item in value)
    return isinstance(value, _SCALARS)


def jsonable(value: Any) -> Any:
    """A driver value as JSON: numbers stay numbers, times become ISO text, anything else its text."""
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)  # UUID, ObjectId, ...


def shaped(operation: str, rows: list[Any], shape: ResultShape, params: Mapping[str, Any]) -> Any:
    """`many`: the rows; `one`: the first row, or a `not_found` failure naming the inputs."""
    if shape == "many":
        return rows
    if not rows:
        shown = ", ".join(f"{name}={value!r}" for name, value in sorted(params.items()))
        raise StepFailure(f"{operation}: no row for {shown or 'these inputs'}", code="not_found")
    return rows[0]
