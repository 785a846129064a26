"""Runs every benchmark at tiny size so they keep working; figures are not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_benchmarks_run_at_tiny_size_and_write_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--size", "tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert {row["benchmark"] for row in rows} >= {
        "engine",
        "floor",
        "engine vs celery",
        "heavy 50x100",
        "assisted fan-out",
        "cost",
    }
    timed = [row for row in rows if row["seconds"] > 0]
    assert timed and all(row["steps_per_s"] > 0 for row in timed)
    assert all(value > 0 for row in rows if row["benchmark"] == "cost" for value in row["extra"].values())


def test_the_issue_28_benchmark_compares_two_trees_and_measures_big_runs(tmp_path: Path) -> None:
    out = tmp_path / "issue28.json"
    command = [sys.executable, "-m", "benchmarks", "issue28", "--before", "HEAD", "--size", "tiny"]
    command += ["--rounds", "1", "--sections", "drain,big_runs", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[drain] drain, paced client:" in done.stdout and "[big_runs] fan-out execute:" in done.stdout
    rows = json.loads(out.read_text())["rows"]
    assert {row["benchmark"] for row in rows} == {
        "mcp queue.drain (before)",
        "mcp queue.drain (after)",
        "big runs",
    }
    stages = {row["variant"].split(": ", 1)[-1] for row in rows if row["benchmark"] == "big runs"}
    assert {"submit", "execute", "run.status first page", "run page", "archive"} <= stages
