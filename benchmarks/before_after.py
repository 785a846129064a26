"""Before / after: the engine of a recorded old commit against this tree, in one run.

`BASELINE_COMMIT` is the last commit before the batched hot path (adaptive claim batches
reported with the next claim, pipelined concurrent calls, hiredis). Its `runtime_core/` and
`lua/` are extracted with `git archive` into a temporary directory and the same
measurement (`measure`, below) runs there in a child process, on the same private
`redis-server`, right before it runs on this tree. The old commit did not depend on
hiredis, so its run imports redis-py without it (the pure-Python reply parser it had).
Rows: the 1,000-step fan-out with 1 / 4 / 8 workers and 50 chains x 100 steps with 4
workers; each "after" row carries its ratio to the matching "before" row.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from benchmarks._harness import Row

BASELINE_COMMIT = "e69324eac2b232a41bf917695be9a135659d34e6"
REPO = Path(__file__).resolve().parents[1]
_BLOCK_HIREDIS = "import sys; sys.modules['hiredis'] = None; "


async def measure(
    redis_url: str, width: int, chain_length: int, chains: int, workers: list[int]
) -> list[Row]:
    """Fan-out and chain rows of whichever `runtime_core` is importable (old or new tree)."""
    from benchmarks.celery_peer import chain_pipeline
    from benchmarks.engine_throughput import engine_run, fan_out

    rows = [await engine_run(redis_url, fan_out(width), n) for n in workers]
    rows.append(await engine_run(redis_url, chain_pipeline(chain_length), 4, executions=chains))
    return rows


def _baseline_tree(into: Path) -> bool:
    """Extract the baseline's runtime_core/ and lua/; False when git or the commit is missing."""
    git = shutil.which("git")
    if git is None:
        return False
    archive = into / "baseline.tar"
    done = subprocess.run(
        [git, "-C", str(REPO), "archive", "-o", str(archive), BASELINE_COMMIT, "runtime_core", "lua"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return False
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return True


def _before(redis_url: str, spec: dict[str, object]) -> list[Row] | None:
    with tempfile.TemporaryDirectory(prefix="mcprt-baseline-") as tmp:
        tree = Path(tmp)
        if not _baseline_tree(tree):
            return None
        out = tree / "rows.json"
        code = (
            f"{_BLOCK_HIREDIS}import asyncio, json, dataclasses; "
            "from benchmarks.before_after import measure; "
            f"rows = asyncio.run(measure({redis_url!r}, {spec['width']}, {spec['chain']}, {spec['chains']}, "
            f"{spec['workers']!r})); "
            f"open({str(out)!r}, 'w').write(json.dumps([dataclasses.asdict(r) for r in rows]))"
        )
        # cwd = the old tree: its runtime_core shadows this one; benchmarks/ comes from PYTHONPATH.
        env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True, timeout=1800)
        return [Row(**row) for row in json.loads(out.read_text(encoding="utf-8"))]


async def run(redis_url: str, *, width: int, chain_length: int, chains: int, workers: list[int]) -> list[Row]:
    spec = {"width": width, "chain": chain_length, "chains": chains, "workers": workers}
    before = await asyncio.to_thread(_before, redis_url, spec)
    after = await measure(redis_url, width, chain_length, chains, workers)
    if before is None:
        print(f"before/after skipped: commit {BASELINE_COMMIT[:9]} is not in this checkout")
        return []
    rows: list[Row] = []
    for old, new in zip(before, after, strict=True):
        old.benchmark, new.benchmark = "before", "after"
        old.baseline = f"commit {BASELINE_COMMIT[:9]}, no hiredis"
        new.ratio, new.baseline = new.steps_per_s / old.steps_per_s, "before"
        rows += [old, new]
    return rows
