"""Strict JSON of values callers submit and steps return (`encoded_strict`): the canonical
text and bytes, and which error a refused value gets, nesting depth first."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import encoded_strict
from runtime_core.pipeline._limits import MAX_JSON_DEPTH


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_the_text_is_compact_and_key_sorted_when_asked() -> None:
    value = {"b": [1, "é"], "a": {"y": None, "x": True}}
    text, encoded = encoded_strict(value, "Result", sort_keys=True)
    assert text == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert encoded == text.encode("utf-8")
    assert encoded_strict(value, "Result")[0] == '{"b":[1,"é"],"a":{"y":null,"x":true}}'


def test_nesting_up_to_the_limit_passes_and_one_level_more_is_refused() -> None:
    encoded_strict(_nested(MAX_JSON_DEPTH), "Result")
    with pytest.raises(InvalidPipelineError, match="nests deeper than"):
        encoded_strict(_nested(MAX_JSON_DEPTH + 1), "Result")


def test_brackets_inside_strings_are_not_nesting() -> None:
    text, _ = encoded_strict({"text": "[{" * (MAX_JSON_DEPTH * 2)}, "Result")
    assert text.startswith('{"text":"[{[{')


@pytest.mark.parametrize(
    "leaf", [float("nan"), float("inf"), object(), "\ud800"], ids=["nan", "inf", "object", "lone surrogate"]
)
def test_a_value_that_is_not_strict_json_is_refused(leaf: Any) -> None:
    with pytest.raises(InvalidPipelineError, match="not JSON-serialisable"):
        encoded_strict({"a": [leaf]}, "Result")


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000], ids=["just over", "far over"])
def test_too_deep_is_the_reason_given_even_when_the_value_is_not_json_either(depth: int) -> None:
    with pytest.raises(InvalidPipelineError, match="nests deeper than"):
        encoded_strict(_nested(depth, leaf=object()), "Result")
