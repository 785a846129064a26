"""canonical_json: the compact, key-sorted form results are hashed in (one shared encoder)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime_core.steps import canonical_json


@pytest.mark.parametrize(
    "value",
    [{"data": {"b": [1, 2.5, "é"], "a": None}}, {"z": {"y": (1, 2)}, "a": True}, "x", None, []],
)
def test_it_is_the_compact_key_sorted_text_with_non_ascii_kept_whatever_was_encoded_before(
    value: Any,
) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    canonical_json({"before": [value, {"k": value}]})
    assert canonical_json(value) == expected
    assert canonical_json(value) == expected
