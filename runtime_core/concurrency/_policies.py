"""The built-in Concurrency-kind policies and their registration.

Owns `ConcurrencyPolicy` (a registry entry that parses its structured config into a throttle
or admission rule) and `register_concurrency_policies`. Must not evaluate rules.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from runtime_core.concurrency._admission_rules import (
    ModelAdmissionRule,
    OperationAdmissionRule,
    ProviderAdmissionRule,
)
from runtime_core.concurrency._throttle import ThrottleRule
from runtime_core.errors import InvalidPipelineError
from runtime_core.policy import Policy, PolicyKind, PolicyRegistry

THROTTLE_POLICY = "concurrency.throttle"
PROVIDER_ADMISSION_POLICY = "concurrency.provider.admission"
MODEL_ADMISSION_POLICY = "concurrency.model.admission"
OPERATION_ADMISSION_POLICY = "concurrency.operation.admission"


class ConcurrencyPolicy(Policy):
    """A Concurrency policy: its `config` parses into one rule model."""

    kind = PolicyKind.CONCURRENCY

    def __init__(self, name: str, rule_model: type[BaseModel]) -> None:
        super().__init__(name)
        self.rule_model = rule_model

    def parse(self, config: dict[str, Any]) -> BaseModel:
        try:
            return self.rule_model.model_validate(config)
        except ValidationError as exc:
            raise InvalidPipelineError(
                "concurrency_policy_config",
                f"Invalid config for concurrency policy '{self.name}': {exc}",
                hint=f"Expected fields: {', '.join(self._field_aliases())}.",
            ) from exc

    def _field_aliases(self) -> list[str]:
        return [field.alias or name for name, field in self.rule_model.model_fields.items()]


def builtin_concurrency_policies() -> list[ConcurrencyPolicy]:
    return [
        ConcurrencyPolicy(THROTTLE_POLICY, ThrottleRule),
        ConcurrencyPolicy(PROVIDER_ADMISSION_POLICY, ProviderAdmissionRule),
        ConcurrencyPolicy(MODEL_ADMISSION_POLICY, ModelAdmissionRule),
        ConcurrencyPolicy(OPERATION_ADMISSION_POLICY, OperationAdmissionRule),
    ]


def register_concurrency_policies(registry: PolicyRegistry) -> PolicyRegistry:
    """Add the built-in Concurrency policies to `registry` and return it."""
    for policy in builtin_concurrency_policies():
        registry.register(policy)
    return registry
