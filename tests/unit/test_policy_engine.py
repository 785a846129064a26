"""Policy Engine V2: definitions (legacy and structured) and the (kind, name) registry."""

from __future__ import annotations

import pytest

from runtime_core.concurrency import register_concurrency_policies
from runtime_core.errors import InvalidPipelineError, RuntimeCoreError
from runtime_core.policy import (
    TIMEOUT_POLICY,
    TRANSIENT_POLICY,
    Policy,
    PolicyDefinition,
    PolicyKind,
    PolicyRegistry,
    RetryPolicy,
    UnknownPolicyError,
    default_policy_registry,
    parse_policy_definitions,
)


class _KeepForDays(Policy):
    kind = PolicyKind.RETENTION


def test_legacy_string_policy_becomes_structured_definition() -> None:
    [definition] = parse_policy_definitions(["retry.transient.default"])

    assert definition == PolicyDefinition(name="retry.transient.default", kind=None, config={})


def test_structured_policy_keeps_name_kind_and_config() -> None:
    [definition] = parse_policy_definitions(
        [{"name": "retry.timeout.default", "kind": "Retry", "config": {"code": "timeout"}}]
    )

    assert (definition.name, definition.kind, definition.config) == (
        "retry.timeout.default",
        "Retry",
        {"code": "timeout"},
    )


def test_legacy_type_key_is_accepted_as_kind() -> None:
    [definition] = parse_policy_definitions([{"name": "retry.timeout.default", "type": "Retry"}])

    assert definition.kind == "Retry"


def test_mixed_policy_list_keeps_declaration_order() -> None:
    definitions = parse_policy_definitions(
        ["retry.transient.default", {"name": "retry.timeout.default", "config": {"code": "timeout"}}]
    )

    assert [definition.name for definition in definitions] == [TRANSIENT_POLICY, TIMEOUT_POLICY]


def test_absent_policy_list_is_empty() -> None:
    assert parse_policy_definitions(None) == []


@pytest.mark.parametrize("bad", [[42], [{"config": {}}], [{"name": ""}], "retry.transient.default"])
def test_malformed_policy_list_raises_invalid_pipeline_error(bad: object) -> None:
    with pytest.raises(InvalidPipelineError) as caught:
        parse_policy_definitions(bad)

    assert caught.value.rule == "policy_definition"


def test_registry_resolves_policy_by_kind_and_name() -> None:
    policy = default_policy_registry().resolve(PolicyKind.RETRY, TRANSIENT_POLICY)

    assert isinstance(policy, RetryPolicy)
    assert policy.name == TRANSIENT_POLICY


def test_same_name_under_another_kind_is_unknown() -> None:
    with pytest.raises(UnknownPolicyError):
        default_policy_registry().resolve(PolicyKind.CONCURRENCY, TRANSIENT_POLICY)


def test_unknown_policy_error_is_typed_and_names_the_policy() -> None:
    with pytest.raises(UnknownPolicyError) as caught:
        default_policy_registry().resolve(PolicyKind.RETRY, "retry.nope")

    error = caught.value
    assert isinstance(error, RuntimeCoreError)
    assert error.name == "retry.nope"
    assert "'retry.nope'" in error.message
    assert error.to_dict()["code"] == "unknown_policy"
    assert TRANSIENT_POLICY in (error.hint or "")


def test_registry_holds_retention_policies() -> None:
    registry = PolicyRegistry([_KeepForDays("retention.keep.days")])

    assert registry.resolve(PolicyKind.RETENTION, "retention.keep.days").name == "retention.keep.days"


def test_registering_the_same_kind_and_name_twice_is_refused() -> None:
    registry = default_policy_registry()

    with pytest.raises(ValueError, match=TRANSIENT_POLICY):
        registry.register(registry.resolve(PolicyKind.RETRY, TRANSIENT_POLICY))


def test_default_registry_holds_builtin_retry_policies() -> None:
    assert default_policy_registry().names(PolicyKind.RETRY) == [TIMEOUT_POLICY, TRANSIENT_POLICY]


def test_concurrency_policies_register_under_concurrency_kind() -> None:
    registry = register_concurrency_policies(default_policy_registry())

    assert registry.names(PolicyKind.CONCURRENCY) == [
        "concurrency.model.admission",
        "concurrency.operation.admission",
        "concurrency.provider.admission",
        "concurrency.throttle",
    ]


def test_resolve_all_uses_the_evaluating_kind_not_the_declared_kind() -> None:
    definitions = parse_policy_definitions([{"name": TRANSIENT_POLICY, "kind": "Concurrency"}])

    [(policy, definition)] = default_policy_registry().resolve_all(PolicyKind.RETRY, definitions, RetryPolicy)

    assert (policy.name, definition.kind) == (TRANSIENT_POLICY, "Concurrency")
