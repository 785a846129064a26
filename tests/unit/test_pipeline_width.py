"""How wide a pipeline can get (`widest_layer`): the engine asks for assistance at creation
when this exceeds its workers."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core.dag._width import widest_layer
from runtime_core.pipeline import PipelineDefinition, parse_pipeline


def _pipeline(edges: dict[str, list[str]]) -> PipelineDefinition:
    steps: list[dict[str, Any]] = [
        {"name": name, "stepKey": "test.noop", "dependsOn": deps} for name, deps in edges.items()
    ]
    return parse_pipeline({"name": "shape", "steps": steps})


def _chain(length: int) -> dict[str, list[str]]:
    return {f"s{i}": [f"s{i - 1}"] if i else [] for i in range(length)}


@pytest.mark.parametrize(
    ("edges", "width"),
    [
        ({"only": []}, 1),
        (_chain(3_000), 1),  # deep: no recursion limit
        ({"start": [], **{f"b{i}": ["start"] for i in range(50)}, "end": [f"b{i}" for i in range(50)]}, 50),
        ({"a": [], "b": [], "c": ["a"]}, 2),
        # d depends on b (layer 1) and c (layer 2): layer 3, not 2
        ({"a": [], "b": ["a"], "c": ["b"], "d": ["b", "c"], "e": ["a"]}, 2),
        # listed before their dependencies
        ({"z": ["y", "x"], "y": ["w"], "x": ["w"], "w": []}, 2),
    ],
    ids=["one-step", "chain", "fan-out", "two-roots", "longest-path-layers", "any-order"],
)
def test_the_widest_layer_counts_the_steps_that_can_be_ready_together(
    edges: dict[str, list[str]], width: int
) -> None:
    assert widest_layer(_pipeline(edges)) == width
