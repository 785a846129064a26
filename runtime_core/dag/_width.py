"""How wide a pipeline can get: the most steps on one of its dependency layers.

A step's layer is the length of its longest dependency path from a root, so the steps of one
layer never depend on each other and can all be ready together (a fan-out's branches, a layer
of a layered DAG). The engine asks for assistance at an execution's creation when this width
exceeds its workers, instead of waiting for the first claim to report the backlog. Must not
touch Redis nor decide whether to ask (the engine does).
"""

from __future__ import annotations

from collections import Counter

from runtime_core.pipeline import PipelineDefinition


def widest_layer(pipeline: PipelineDefinition) -> int:
    """The most steps sharing one dependency layer (0 for no steps; the pipeline is acyclic:
    validated at creation)."""
    depends = {step.name: step.depends_on for step in pipeline.steps}
    layer: dict[str, int] = {}
    for name in depends:
        stack = [name]
        while stack:  # iterative depth-first: a chain of thousands of steps needs no recursion
            current = stack[-1]
            missing = [dep for dep in depends[current] if dep not in layer]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            layer[current] = 1 + max((layer[dep] for dep in depends[current]), default=-1)
    return max(Counter(layer.values()).values(), default=0)
