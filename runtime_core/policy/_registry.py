"""The policy registry: registered policies looked up by (kind, name).

Owns the `Policy` base type, `PolicyRegistry` and `UnknownPolicyError`. Must not evaluate
policies or know what any particular kind does with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, TypeVar

from runtime_core.errors import InvalidPipelineError
from runtime_core.policy._definition import PolicyDefinition, PolicyKind


class UnknownPolicyError(InvalidPipelineError):
    """A configured policy name is not registered for the engine kind evaluating it."""

    code = "unknown_policy"

    def __init__(self, kind: PolicyKind, name: str, known: Iterable[str]) -> None:
        known_names = ", ".join(sorted(known)) or "none"
        super().__init__(
            "policy_registered",
            f"Unknown {kind.value} policy '{name}'.",
            hint=f"Use one of the registered {kind.value} policies: {known_names}.",
        )
        self.kind = kind
        self.name = name


class Policy:
    """A registered policy. Subclasses fix `kind` and add the behaviour their engine calls."""

    kind: ClassVar[PolicyKind]

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


PolicyT = TypeVar("PolicyT", bound=Policy)


class PolicyRegistry:
    """Holds policies of every kind; one name may exist once per kind."""

    def __init__(self, policies: Iterable[Policy] = ()) -> None:
        self._policies: dict[tuple[PolicyKind, str], Policy] = {}
        for policy in policies:
            self.register(policy)

    def register(self, policy: Policy) -> None:
        key = (policy.kind, policy.name)
        if key in self._policies:
            raise ValueError(f"{policy.kind.value} policy '{policy.name}' is already registered.")
        self._policies[key] = policy

    def names(self, kind: PolicyKind) -> list[str]:
        return sorted(name for policy_kind, name in self._policies if policy_kind is kind)

    def resolve(self, kind: PolicyKind, name: str) -> Policy:
        try:
            return self._policies[(kind, name)]
        except KeyError:
            raise UnknownPolicyError(kind, name, self.names(kind)) from None

    def resolve_all(
        self, kind: PolicyKind, definitions: Iterable[PolicyDefinition], policy_type: type[PolicyT]
    ) -> list[tuple[PolicyT, PolicyDefinition]]:
        """Resolve each definition under the evaluating engine's kind, in declaration order."""
        resolved: list[tuple[PolicyT, PolicyDefinition]] = []
        for definition in definitions:
            policy = self.resolve(kind, definition.name)
            if not isinstance(policy, policy_type):
                raise TypeError(f"{policy!r} is registered as {kind.value}, not a {policy_type.__name__}.")
            resolved.append((policy, definition))
        return resolved

    def __contains__(self, key: tuple[PolicyKind, str]) -> bool:
        return key in self._policies
