"""validate_pipeline's `retention_valid` rule: an invalid `config.retention` is refused up front."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import parse_pipeline, validate_pipeline
from runtime_core.retention import COMPACT_POLICY, HYBRID_POLICY, RetentionEngine

CHECK_RETENTION = RetentionEngine().validate


def _pipeline(retention: Any) -> Any:
    return parse_pipeline(
        {"name": "p", "config": {"retention": retention}, "steps": [{"name": "a", "stepKey": "test.noop"}]}
    )


@pytest.mark.parametrize(
    "retention",
    [
        COMPACT_POLICY,
        [HYBRID_POLICY],
        {"policies": [{"name": HYBRID_POLICY, "config": {"triggers": {"completedSteps": 2}}}]},
        {"policies": [], "compactMinBytes": 0},
    ],
)
def test_a_valid_retention_section_passes(retention: Any) -> None:
    validate_pipeline(_pipeline(retention), ["test.noop"], check_retention=CHECK_RETENTION)


@pytest.mark.parametrize(
    ("retention", "fragment", "hint"),
    [
        (["retention.nope"], "Unknown Retention policy 'retention.nope'", HYBRID_POLICY),
        ({"policies": [COMPACT_POLICY], "compactMinBytes": -1}, "compactMinBytes", "compactMinBytes"),
        ({"policies": [COMPACT_POLICY], "schedule": "daily"}, "schedule", "compactMinBytes"),
        (
            {"policies": [{"name": COMPACT_POLICY, "config": {"triggers": {"completedSteps": 0}}}]},
            f"retention policy '{COMPACT_POLICY}'",
            "completedSteps",
        ),
        (42, "Invalid config.retention", "policy name"),
    ],
)
def test_an_invalid_retention_section_is_refused_naming_the_rule_and_the_fix(
    retention: Any, fragment: str, hint: str
) -> None:
    with pytest.raises(InvalidPipelineError) as caught:
        validate_pipeline(_pipeline(retention), ["test.noop"], check_retention=CHECK_RETENTION)
    assert caught.value.rule == "retention_valid"
    assert fragment in caught.value.message
    assert caught.value.hint is not None and hint in caught.value.hint


def test_structural_rules_are_reported_before_the_retention_rule() -> None:
    pipeline = parse_pipeline(
        {"name": "p", "config": {"retention": ["retention.nope"]}, "steps": [{"name": "a", "stepKey": "x"}]}
    )
    with pytest.raises(InvalidPipelineError) as caught:
        validate_pipeline(pipeline, ["test.noop"], check_retention=CHECK_RETENTION)
    assert caught.value.rule == "step_keys_registered"
