"""Issue 28's figures in one command, before / after in one run:

    python -m benchmarks issue28 --before <commit> [--size tiny|full] [--rounds 2]

Each section is measured on the `--before` commit's code and on this tree's, each in a child
process started from its own tree (the same benchmark code on both sides, `benchmarks/_trees`),
on one private `redis-server`, rounds interleaved (before, after, before, after) so a machine
whose speed drifts treats both alike; each side keeps its best round. Ratios come first:

- drain: `queue.drain` of queued one-step runs that execute (16 run slots), the client
  calling again once a run ended (the headline) and spinning; client round trips per
  executed run, runs/s;
- latency: MCP submit -> Completed p50 of a one-step run (in-memory client, background pump);
- engine: the 1,000-step fan-out against the batched Redis floor measured in the same tree
  (the floor's code is the benchmark's, the same on both sides), 1 / 4 / 8 workers;
- tracing: the same fan-out with OTLP export on (full sampling, real SDK batch processor,
  an exporter that drops the batches) against off;
- big runs: one execution from 1,000 to 10,000 and (limit raised) 100,000 steps, fan-out and
  layered: time and Redis bytes per step at each stage, control-plane memory
  (`benchmarks/big_runs.py`, after only: the before tree has no paged run.status).

The load average is printed with every section: on a shared machine the ratios move with it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks._harness import Row, machine_note, percentile, print_table, private_redis, write_json
from benchmarks._trees import REPO, extract_tree, measure_in

SIZES = {
    "tiny": {"runs": 20, "latency": 3, "width": 20, "workers": [1, 2], "big": [100, 1000], "layers": 5},
    "full": {
        "runs": 1000,
        "latency": 50,
        "width": 1000,
        "workers": [1, 4, 8],
        "big": [1000, 10000, 100000],
        "layers": 100,
    },
}
SECTIONS = ("drain", "latency", "engine", "tracing", "big_runs")
COMPARED = ("drain", "latency", "engine", "tracing")  # measured on both trees


async def measure(section: str, redis_url: str, spec: dict) -> list[Row]:
    """One section's rows, on whichever `runtime_core` is importable."""
    if section == "drain":
        return await _drain(redis_url, spec)
    if section == "latency":
        return await _latency(redis_url, spec)
    if section == "engine":
        return await _engine(redis_url, spec)
    if section == "tracing":
        return await _tracing(redis_url, spec)
    from benchmarks.big_runs import run as big_runs

    return await big_runs(redis_url, sizes=spec["big"], layers=spec["layers"])


async def _drain(redis_url: str, spec: dict) -> list[Row]:
    from benchmarks.control_plane_latency import drain_row

    with tempfile.TemporaryDirectory(prefix="mcprt-bench-28-") as tmp:
        root = Path(tmp)
        return [await drain_row(redis_url, root, spec["runs"], name) for name in ("bound", "bound-spinning")]


async def _latency(redis_url: str, spec: dict) -> list[Row]:
    from benchmarks.control_plane_latency import _in_memory_client, _one_run

    with tempfile.TemporaryDirectory(prefix="mcprt-bench-28-") as tmp:
        async with _in_memory_client(redis_url, Path(tmp), background_pump=True) as client:
            completed = [(await _one_run(client, "QueueFirst"))[1] * 1000 for _ in range(spec["latency"])]
    return [
        Row(
            "mcp latency",
            "in-memory QueueFirst submit->Completed",
            len(completed),
            sum(completed) / 1000,
            0,
            0,
            0,
            percentile(completed, 50),
            percentile(completed, 99),
        )
    ]


async def _engine(redis_url: str, spec: dict) -> list[Row]:
    from benchmarks.engine_throughput import batched_floor_run, engine_run, fan_out

    rows = []
    pipeline = fan_out(spec["width"])
    for workers in spec["workers"]:
        floor = max([await batched_floor_run(redis_url, pipeline, workers) for _ in range(2)], key=_speed)
        ours = max([await engine_run(redis_url, pipeline, workers) for _ in range(2)], key=_speed)
        ours.ratio, ours.baseline = ours.steps_per_s / floor.steps_per_s, "floor batched"
        rows += [floor, ours]
    return rows


async def _tracing(redis_url: str, spec: dict) -> list[Row]:
    from benchmarks.tracing_overhead import run as tracing

    return await tracing(redis_url, width=spec["width"], worker_counts=[n for n in spec["workers"] if n <= 4])


def _speed(row: Row) -> float:
    return row.steps_per_s


def _in_tree(tree: Path, section: str, redis_url: str, spec: dict) -> list[Row]:
    code = (
        "from benchmarks.issue28 import measure; from benchmarks._trees import write_rows; "
        f"write_rows(asyncio.run(measure({section!r}, {redis_url!r}, {spec!r})), out)"
    )
    return measure_in(tree, code)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} / {five:.1f}"


def _best(rounds: list[list[Row]]) -> list[Row]:
    """Per row position, the round where it did best (throughput up, latency down)."""

    def better(row: Row) -> float:
        return -row.p50_ms if row.benchmark == "mcp latency" else row.steps_per_s

    return [max(rows, key=better) for rows in zip(*rounds, strict=True)]


def _compare(before: list[Row], after: list[Row]) -> list[Row]:
    rows: list[Row] = []
    for old, new in zip(before, after, strict=True):
        old.benchmark, new.benchmark = f"{old.benchmark} (before)", f"{new.benchmark} (after)"
        rows += [old, new]
        if new.ratio is not None:  # a ratio of its own section (tracing on / off) stays
            continue
        if new.benchmark.startswith("mcp latency"):
            new.ratio, new.baseline = old.p50_ms / new.p50_ms, "before (p50 speed-up)"
        elif old.steps_per_s:
            new.ratio, new.baseline = new.steps_per_s / old.steps_per_s, "before"
    return rows


def _ratios(section: str, rows: list[Row]) -> list[str]:
    """The issue's ratios of a section, as lines (printed first)."""
    lines = []
    find: Callable[[str, str], list[Row]] = lambda bench, variant: [  # noqa: E731
        r for r in rows if r.benchmark.startswith(bench) and variant in r.variant
    ]
    if section == "drain":
        for variant, label in (("execution-bound (16", "paced client"), ("spinning", "spinning client")):
            pair = find("mcp queue.drain", variant)
            if len(pair) == 2:
                old, new = pair
                lines.append(
                    f"drain, {label}: {new.steps_per_s / old.steps_per_s:.2f}x runs/s "
                    f"({new.steps_per_s:.0f} vs {old.steps_per_s:.0f}); round trips per executed run "
                    f"{new.round_trips_per_step:.1f} (before {old.round_trips_per_step:.1f})"
                )
    elif section == "latency":
        pair = find("mcp latency", "Completed")
        if len(pair) == 2:
            lines.append(
                f"MCP submit -> Completed p50: {pair[1].p50_ms:.1f} ms (before {pair[0].p50_ms:.1f} ms)"
            )
    elif section == "engine":
        for variant in sorted({r.variant for r in rows}):
            ours = [r for r in find("engine", variant) if r.ratio is not None]
            if len(ours) == 2:
                lines.append(
                    f"engine / batched floor, {variant}: {ours[1].ratio:.2f}x (before {ours[0].ratio:.2f}x)"
                )
    elif section == "big_runs":
        lines += _growth(rows)
    elif section == "tracing":
        for variant in sorted({r.variant for r in rows}):
            on = [r for r in find("tracing on", variant) if r.ratio is not None]
            if len(on) == 2:
                lines.append(f"tracing on / off, {variant}: {on[1].ratio:.2f}x (before {on[0].ratio:.2f}x)")
    return lines


def _growth(rows: list[Row]) -> list[str]:
    """Per shape and stage: microseconds per step at each size, and how that changed from the
    smallest size to the largest (about 1x: linear; ~10x per tenfold growth: quadratic)."""
    table: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        if ": " not in row.variant or "us_per_step" not in row.extra:
            continue
        run, stage = row.variant.split(": ", 1)
        shape = run.split(" ")[0]
        table.setdefault(f"{shape} {stage}", []).append((row.steps, row.extra["us_per_step"]))
    lines = []
    for name, points in table.items():
        points.sort()
        cost = ", ".join(f"{steps:,}: {us:,.0f}" for steps, us in points)
        growth = points[-1][1] / points[0][1] if points[0][1] > 0 else 0.0
        lines.append(f"{name}: us per step {cost} ({growth:.1f}x from {points[0][0]:,} to {points[-1][0]:,})")
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks issue28")
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/issue28.json"))
    args = parser.parse_args(argv)
    spec = SIZES[args.size]
    sections = [s for s in args.sections.split(",") if s]
    all_rows: list[Row] = []
    summary: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mcprt-before-") as tmp, private_redis() as server:
        before_tree = Path(tmp)
        if not extract_tree(args.before, before_tree):
            raise SystemExit(f"commit {args.before} is not in this checkout")
        for section in sections:
            trees = [("before", before_tree), ("after", REPO)] if section in COMPARED else [("after", REPO)]
            rounds: dict[str, list[list[Row]]] = {name: [] for name, _ in trees}
            loads = []
            for _ in range(args.rounds if section in COMPARED else 1):
                for name, tree in trees:
                    rounds[name].append(_in_tree(tree, section, server.url, spec))
                    loads.append(_load())
            best = {name: _best(measured) for name, measured in rounds.items()}
            rows = _compare(best["before"], best["after"]) if "before" in best else best["after"]
            summary += [f"[{section}] {line}" for line in _ratios(section, rows)]
            summary.append(f"[{section}] {'; '.join(loads)}")
            all_rows += rows
    print(f"machine: {machine_note()}; before = {args.before}")
    for line in summary:
        print(line)
    print()
    print_table(all_rows)
    write_json(all_rows, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main(__import__("sys").argv[1:])
