"""Another commit's code next to this one: extract its packages and measure them in a child.

`extract_tree` writes the packages of a commit (`git archive`) into a directory; `measure_in`
runs `python -c CODE` there with this repository's `benchmarks/` on the path, so the
commit's `runtime_core` / `mcp_runtime` shadow this tree's while the benchmark code is the
same on both sides; CODE writes its rows as JSON to the path it is given.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from benchmarks._harness import Row

REPO = Path(__file__).resolve().parents[1]
TREE_PATHS = ("runtime_core", "mcp_runtime", "lua", "rbac_policies", "examples", "pyproject.toml")
"""What a measured tree needs: its packages, Lua scripts, default policy and pipelines (and
the pyproject.toml that makes it a checkout, where those folders are found)."""


def extract_tree(commit: str, into: Path, paths: tuple[str, ...] = TREE_PATHS) -> bool:
    """Write `paths` of `commit` into `into`; False when git or the commit is missing."""
    git = shutil.which("git")
    if git is None:
        return False
    archive = into / "tree.tar"
    done = subprocess.run(
        [git, "-C", str(REPO), "archive", "-o", str(archive), commit, *paths],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return False
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return True


def measure_in(tree: Path, code: str, *, prelude: str = "", timeout_s: float = 3600) -> list[Row]:
    """Run `code` (a Python statement writing rows to `out`, a str path) with `tree` first on
    the import path; its rows."""
    out = tree / "rows.json"
    program = (
        f"{prelude}import asyncio, json, dataclasses, sys; sys.path.insert(0, {str(tree)!r}); "
        f"out = {str(out)!r}; {code}"
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", program], cwd=tree, env=env, check=True, timeout=timeout_s)
    rows = [Row(**row) for row in json.loads(out.read_text(encoding="utf-8"))]
    out.unlink()
    return rows


def write_rows(rows: list[Row], out: str) -> None:
    """What `measure_in`'s code calls to hand its rows back."""
    from dataclasses import asdict

    Path(out).write_text(json.dumps([asdict(row) for row in rows]), encoding="utf-8")
