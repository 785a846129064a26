"""The layered layout of a pipeline's DAG: where each step's box and each dependency's curve go.

Owns placing steps left to right in layers (a step's layer is one more than its deepest
dependency's), ordering each layer to keep edges short (a few barycentre sweeps, ties by
the definition's order), and the box and curve coordinates an SVG draws. Pure: no I/O, no
rendering, no statuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NODE_WIDTH = 168
NODE_HEIGHT = 54
LAYER_GAP = 64
ROW_GAP = 18
MARGIN = 12
_SWEEPS = 4


@dataclass(frozen=True)
class GraphStep:
    """What the layout needs of a step: its name and the names it depends on."""

    name: str
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeBox:
    name: str
    layer: int
    x: int
    y: int
    width: int = NODE_WIDTH
    height: int = NODE_HEIGHT


@dataclass(frozen=True)
class EdgeCurve:
    source: str
    target: str
    path: str
    """SVG path data: a cubic curve from the source's right side to the target's left side."""


@dataclass(frozen=True)
class GraphLayout:
    nodes: dict[str, NodeBox]
    edges: list[EdgeCurve]
    width: int
    height: int


def layered_layout(steps: Sequence[GraphStep]) -> GraphLayout:
    """The layout of an acyclic graph given in any order (dependencies on unknown names are ignored)."""
    layers = _layers(steps)
    rows = _ordered_rows(steps, layers)
    tallest = max((len(row) for row in rows), default=0)
    height = 2 * MARGIN + tallest * NODE_HEIGHT + max(tallest - 1, 0) * ROW_GAP
    nodes: dict[str, NodeBox] = {}
    for layer, row in enumerate(rows):
        used = len(row) * NODE_HEIGHT + max(len(row) - 1, 0) * ROW_GAP
        top = (height - used) // 2
        for index, name in enumerate(row):
            x = MARGIN + layer * (NODE_WIDTH + LAYER_GAP)
            nodes[name] = NodeBox(name, layer, x, top + index * (NODE_HEIGHT + ROW_GAP))
    width = 2 * MARGIN + len(rows) * NODE_WIDTH + max(len(rows) - 1, 0) * LAYER_GAP
    edges = [
        _curve(nodes[dep], nodes[step.name]) for step in steps for dep in step.depends_on if dep in nodes
    ]
    return GraphLayout(nodes=nodes, edges=edges, width=width, height=height)


def layer_of(steps: Sequence[GraphStep]) -> dict[str, int]:
    """Each step's layer: 0 for a step without dependencies, else one more than its deepest one."""
    return _layers(steps)


def _layers(steps: Sequence[GraphStep]) -> dict[str, int]:
    """Longest path from a source, in a topological order (no recursion: 10,000 steps are fine)."""
    known = {step.name for step in steps}
    deps = {step.name: [d for d in step.depends_on if d in known] for step in steps}
    dependents: dict[str, list[str]] = {name: [] for name in known}
    for name, names in deps.items():
        for dep in names:
            dependents[dep].append(name)
    waiting = {name: len(names) for name, names in deps.items()}
    ready = [step.name for step in steps if waiting[step.name] == 0]
    layer = dict.fromkeys(ready, 0)
    while ready:
        name = ready.pop()
        for child in dependents[name]:
            layer[child] = max(layer.get(child, 0), layer[name] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return layer


def _ordered_rows(steps: Sequence[GraphStep], layers: dict[str, int]) -> list[list[str]]:
    rows: list[list[str]] = [[] for _ in range(max(layers.values(), default=-1) + 1)]
    for step in steps:  # definition order first: the tie-break of every sweep
        if step.name in layers:
            rows[layers[step.name]].append(step.name)
    parents = {step.name: [d for d in step.depends_on if d in layers] for step in steps}
    children: dict[str, list[str]] = {name: [] for name in layers}
    for name, names in parents.items():
        for parent in names:
            children[parent].append(name)
    for _ in range(_SWEEPS):
        for index in range(1, len(rows)):
            rows[index] = _by_barycentre(rows[index], rows[index - 1], parents)
        for index in range(len(rows) - 2, -1, -1):
            rows[index] = _by_barycentre(rows[index], rows[index + 1], children)
    return rows


def _by_barycentre(row: list[str], neighbour_row: list[str], links: dict[str, list[str]]) -> list[str]:
    """Sort a layer by the mean position of each step's links in the neighbouring layer (stable)."""
    position = {name: index for index, name in enumerate(neighbour_row)}

    def key(item: tuple[int, str]) -> float:
        index, name = item
        linked = [position[other] for other in links.get(name, ()) if other in position]
        return sum(linked) / len(linked) if linked else float(index)

    return [name for _, name in sorted(enumerate(row), key=key)]


def _curve(source: NodeBox, target: NodeBox) -> EdgeCurve:
    x1, y1 = source.x + source.width, source.y + source.height // 2
    x2, y2 = target.x, target.y + target.height // 2
    bend = (x2 - x1) // 2
    return EdgeCurve(source.name, target.name, f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}")
