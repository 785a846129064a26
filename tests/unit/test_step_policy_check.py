"""validate_step_policies: the create-time check of `config.retry` / `config.concurrency` checks
the steps that configure neither only once, and still every step that configures one."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core.dag._gating import validate_step_policies
from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import parse_pipeline
from runtime_core.policy import RetryEngine


class CountingRetry:
    def __init__(self) -> None:
        self.engine = RetryEngine()
        self.checked: list[dict[str, Any]] = []

    def validate(self, step_config: dict[str, Any]) -> Any:
        self.checked.append(step_config)
        return self.engine.validate(step_config)


def _fan_out(configs: dict[int, dict[str, Any]], pipeline_config: dict[str, Any] | None = None) -> Any:
    steps = [{"name": f"n{i}", "stepKey": "test.noop", "config": configs.get(i, {})} for i in range(50)]
    return parse_pipeline({"name": "fan", "config": pipeline_config or {}, "steps": steps})


def test_steps_that_configure_no_policy_are_checked_once_and_the_others_each() -> None:
    retry = CountingRetry()
    own = {"retry": {"maxRetries": 2}}
    validate_step_policies(_fan_out({10: own, 20: own}), retry.validate)
    assert retry.checked == [{}, own, own]


def test_a_bad_retry_section_after_plain_steps_is_refused_naming_its_step() -> None:
    with pytest.raises(InvalidPipelineError, match="Step 'n42'") as refused:
        validate_step_policies(_fan_out({42: {"retry": {"maxRetries": "many"}}}), RetryEngine().validate)
    assert refused.value.rule == "policies_valid"


def test_with_a_pipeline_concurrency_section_every_step_is_checked() -> None:
    retry = CountingRetry()
    validate_step_policies(_fan_out({}, {"concurrency": {"maxDegreeOfParallelism": 4}}), retry.validate)
    assert len(retry.checked) == 50
