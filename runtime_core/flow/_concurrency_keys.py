"""Per-key concurrency of one run: its key's value, identity and the fields that carry them.

Owns reading a concurrency key expression (`input.customerId`, `input.customer.id`) over a
run's input (a missing or non-scalar value is refused, nothing queued), the key's identity
(a hash of tenant, pipeline and value: every key of a tenant lives in the tenant's queue
partition, and the value never becomes part of a Redis key name), and the run-record fields
the queue scripts read (`lua/lib/flow_keys.lua`). Also names the dispatch attribute that
tells a run's instance the run holds a key's slot, so its end releases it. Must not touch
Redis.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime_core.errors import InvalidArgumentError
from runtime_core.flow._declarations import ConcurrencyKey

FLOW_KEY_ATTRIBUTE = "flow.concurrency_key"
"""Set on the dispatch of a run holding a key's slot (its local run's metadata): its end
releases the slot (`flow_release`)."""
MAX_KEY_VALUE_LENGTH = 500


class KeyPlacement(BaseModel):
    """The concurrency key a run was submitted under."""

    model_config = ConfigDict(frozen=True)

    declaration: ConcurrencyKey
    value: str
    key_id: str

    def record_fields(self) -> dict[str, str]:
        """The run-record fields the queue scripts place the run by."""
        return {
            "flow_key": self.key_id,
            "flow_limit": str(self.declaration.limit),
            "flow_strategy": self.declaration.strategy.value,
            "concurrency_key": f"{self.declaration.key}={self.value}",
        }


def key_value(declaration: ConcurrencyKey, input: dict[str, Any]) -> str:
    """The value of `declaration.key` in the run's input, as text."""
    value: Any = {"input": input}
    for part in declaration.key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise InvalidArgumentError(
                f"The concurrency key {declaration.key} has no value in the input.",
                hint=f"Give the input a value at {declaration.key} (a string, number or boolean).",
            )
        value = value[part]
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str | int | float) or len(str(value)) > MAX_KEY_VALUE_LENGTH:
        raise InvalidArgumentError(
            f"The concurrency key {declaration.key} must be a string, number or boolean of at most "
            f"{MAX_KEY_VALUE_LENGTH} characters.",
            hint="Point the key at a scalar field of the input, e.g. input.customerId.",
        )
    return str(value)


def place_key(
    declaration: ConcurrencyKey, tenant_id: str, pipeline_name: str, input: dict[str, Any]
) -> KeyPlacement:
    value = key_value(declaration, input)
    digest = hashlib.sha256("\0".join((tenant_id, pipeline_name, value)).encode()).hexdigest()
    return KeyPlacement(declaration=declaration, value=value, key_id=digest[:32])
