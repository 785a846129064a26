"""The process's pipeline limits (steps, document bytes) come from the environment and can be
raised; a stored pipeline, accepted by whichever process stored it, is read back whatever this
process's limit, without walking its nesting again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime_core.errors import ConfigurationError, InputTooLargeError, InvalidPipelineError
from runtime_core.pipeline import (
    MAX_PIPELINE_BYTES,
    MAX_STEPS,
    PipelineDefinition,
    PipelineLimits,
    parse_pipeline,
    parse_stored_pipeline,
    pipeline_limits,
    set_pipeline_limits,
    validate_pipeline,
)


@pytest.fixture(autouse=True)
def default_limits() -> Iterator[None]:
    yield
    set_pipeline_limits(PipelineLimits())


def _chain(steps: int) -> dict[str, object]:
    body = [
        {"name": f"s{i}", "stepKey": "test.noop", "dependsOn": [f"s{i - 1}"] if i else []}
        for i in range(steps)
    ]
    return {"name": "chain", "steps": body}


def test_the_limits_come_from_the_environment_and_refuse_anything_but_a_positive_number() -> None:
    assert PipelineLimits.from_env({}) == PipelineLimits(MAX_STEPS, MAX_PIPELINE_BYTES)
    raised = PipelineLimits.from_env(
        {"MCP_RUNTIME_MAX_PIPELINE_STEPS": "100_000", "MCP_RUNTIME_MAX_PIPELINE_BYTES": "67108864"}
    )
    assert raised == PipelineLimits(100_000, 64 * 1024 * 1024)
    for bad in ("0", "-3", "many"):
        with pytest.raises(ConfigurationError, match="MCP_RUNTIME_MAX_PIPELINE_STEPS"):
            PipelineLimits.from_env({"MCP_RUNTIME_MAX_PIPELINE_STEPS": bad})


def test_a_raised_step_limit_accepts_what_the_default_refuses() -> None:
    pipeline = parse_pipeline(_chain(MAX_STEPS + 1))
    with pytest.raises(InputTooLargeError, match="MCP_RUNTIME_MAX_PIPELINE_STEPS"):
        validate_pipeline(pipeline, {"test.noop"})
    set_pipeline_limits(PipelineLimits(max_steps=MAX_STEPS + 1))
    validate_pipeline(pipeline, {"test.noop"})
    assert pipeline_limits().max_steps == MAX_STEPS + 1


def test_a_stored_pipeline_is_read_back_whatever_this_processs_byte_limit() -> None:
    text = parse_pipeline(_chain(50)).to_json()
    set_pipeline_limits(PipelineLimits(max_bytes=len(text) - 1))
    with pytest.raises(InputTooLargeError):
        parse_pipeline(text)
    assert len(parse_stored_pipeline(text).steps) == 50


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = {"v": value}
    return value


@pytest.mark.parametrize("steps", [5, 2_000], ids=["small-text", "large-text"])
def test_a_stored_pipeline_is_not_walked_for_its_nesting_again_but_is_still_strict_json(steps: int) -> None:
    deep = _chain(steps)
    deep["config"] = {"deep": _nested(70)}  # past the nesting parse_pipeline accepts
    text = PipelineDefinition.model_validate(deep).to_json()
    with pytest.raises(InvalidPipelineError, match="nests deeper"):
        parse_pipeline(text)
    assert parse_stored_pipeline(text).config == deep["config"]
    padding = " " * len(text)  # the same size class as the stored text
    for broken in (text.replace('"v":1', '"v":NaN'), "[" * 100_000 + padding):
        with pytest.raises(InvalidPipelineError):
            parse_stored_pipeline(broken)
