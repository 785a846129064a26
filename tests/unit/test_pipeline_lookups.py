"""A pipeline's by-name lookups (step, sinks, step keys) follow its steps, also after a copy."""

from __future__ import annotations

import pickle

import pytest

from runtime_core.pipeline import StepDefinition, parse_pipeline

PIPELINE = {
    "name": "lookups",
    "steps": [
        {"name": "a", "stepKey": "test.noop"},
        {"name": "b", "stepKey": "test.echo", "dependsOn": ["a"]},
        {"name": "c", "stepKey": "test.noop", "dependsOn": ["a"]},
    ],
}


def test_lookups_answer_by_name() -> None:
    pipeline = parse_pipeline(PIPELINE)
    assert pipeline.step("b").step_key == "test.echo"
    assert pipeline.sink_step_names() == {"b", "c"}
    assert pipeline.step_keys() == {"a": "test.noop", "b": "test.echo", "c": "test.noop"}
    with pytest.raises(KeyError):
        pipeline.step("missing")


def test_a_copy_with_other_steps_answers_for_its_own_steps() -> None:
    pipeline = parse_pipeline(PIPELINE)
    assert pipeline.sink_step_names() == {"b", "c"}  # computed for the original
    joined = StepDefinition(name="d", step_key="test.noop", depends_on=("b", "c"))
    extended = pipeline.model_copy(update={"steps": (*pipeline.steps, joined)})
    assert extended.sink_step_names() == {"d"}
    assert extended.step("d").depends_on == ("b", "c")
    assert pipeline.sink_step_names() == {"b", "c"}


def test_the_lookups_change_neither_equality_nor_the_wire_form() -> None:
    pipeline = parse_pipeline(PIPELINE)
    fresh = parse_pipeline(PIPELINE)
    pipeline.sink_step_names()
    assert pipeline == fresh
    assert pipeline.to_json() == fresh.to_json()
    assert pickle.loads(pickle.dumps(pipeline)).sink_step_names() == {"b", "c"}
