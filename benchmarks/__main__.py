"""`python -m benchmarks [--size tiny|full]`: run every benchmark, print a table, write JSON.

`python -m benchmarks issue28 --before <commit>`: issue 28's before / after figures (see
`benchmarks/issue28.py`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from benchmarks import (
    before_after,
    celery_peer,
    control_plane_latency,
    control_plane_scale,
    cost_growth,
    engine_throughput,
    execution_assistance,
    issue28,
    process_scaling,
    tracing_overhead,
)
from benchmarks._harness import machine_note, print_table, private_redis, write_json

SIZES = {
    "tiny": {
        "width": 20,
        "scale_width": 200,
        "assist_width": 200,
        "workers": [1, 2],
        "chain": 5,
        "chains": 2,
        "mcp_iterations": 3,
        "drain_runs": 20,
        "runs": 3,
        "steps": 10,
        "executions": 5,
        "cost_steps": 100,
        "in_flight": 5,
    },
    "full": {
        "width": 1000,
        "scale_width": 9000,
        "assist_width": 9000,
        "workers": [1, 2, 4, 8],
        "chain": 100,
        "chains": 50,
        "mcp_iterations": 50,
        "drain_runs": 1000,
        "runs": 50,
        "steps": 100,
        "executions": 100,
        "cost_steps": 1000,
        "in_flight": 100,
    },
}


async def _main(size: str, out: Path) -> None:
    spec = SIZES[size]
    with private_redis() as server:
        rows = await before_after.run(
            server.url,
            width=spec["width"],
            chain_length=spec["chain"],
            chains=spec["chains"],
            workers=[n for n in spec["workers"] if n != 2],
        )
        rows += await engine_throughput.run(server.url, width=spec["width"], worker_counts=spec["workers"])
        rows += await tracing_overhead.run(server.url, width=spec["width"], worker_counts=spec["workers"])
        rows += await celery_peer.run(
            server.url, width=spec["width"], chain_length=spec["chain"], chains=spec["chains"], workers=4
        )
        rows += await control_plane_scale.run(server.url, runs=spec["runs"], steps=spec["steps"])
        rows += await process_scaling.run(
            server.url, width=spec["scale_width"], runs=spec["runs"], steps=spec["steps"]
        )
        rows += await execution_assistance.run(server.url, width=spec["assist_width"])
        rows += await cost_growth.run(
            server.url, executions=spec["executions"], steps=spec["cost_steps"], in_flight=spec["in_flight"]
        )
        rows += await control_plane_latency.run(
            server.url, iterations=spec["mcp_iterations"], drain_runs=spec["drain_runs"]
        )
    print(f"machine: {machine_note()}")
    print_table(rows)
    write_json(rows, out)
    print(f"wrote {out}")


def main() -> None:
    if sys.argv[1:2] == ["issue28"]:
        issue28.main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/latest.json"))
    args = parser.parse_args()
    asyncio.run(_main(args.size, args.out))


if __name__ == "__main__":
    main()
