"""Issue 14.1 from the command line: plug-in steps run with `mcp-runtime run`, `mcp-runtime steps`
shows their config schemas, and a plug-in that fails to import stops `run` and
`runtime-instance` at start-up with an error naming its entry point (real OS processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_core.hot_state import EmbeddedRedis
from runtime_core.steps import STEP_ENTRY_POINT_GROUP
from tests.helpers import runtime_instance_argv

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "step-plugin" / "pipelines" / "slug-and-stats.json"
TEXT = json.dumps({"title": "Hello, Plug-in World!", "body": "the cat and the other cat"})
BROKEN = "broken = broken_steps_not_installed:STEPS"


def _cli(*args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra_path), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "mcp_runtime.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=env,
    )


@pytest.fixture
def broken_plugin(tmp_path: Path) -> Path:
    """A directory holding an installed distribution whose entry point names a missing module."""
    info = tmp_path / "site" / "broken_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken_plugin\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(f"[{STEP_ENTRY_POINT_GROUP}]\n{BROKEN}\n", encoding="utf-8")
    return tmp_path / "site"


def test_mcp_runtime_run_executes_the_example_plugin_pipeline(tmp_path: Path) -> None:
    done = _cli("run", str(PIPELINE), "--input", TEXT, "--workers", "2", "--data-dir", str(tmp_path))

    assert done.returncode == 0, done.stderr
    assert "Status: Completed" in done.stdout
    assert '"slug": "hello-plug-in-world"' in done.stdout


def test_mcp_runtime_steps_prints_a_plugin_step_config_schema() -> None:
    done = _cli("steps", "example.word_stats")

    assert done.returncode == 0, done.stderr
    [described] = json.loads(done.stdout)
    assert described["source"] == "entry point 'word_stats' (mcp-runtime-example-steps 0.1.0)"
    assert described["config_schema"]["required"] == ["textInput"]


def test_a_plugin_that_fails_to_import_stops_run_at_start_up_naming_its_entry_point(
    tmp_path: Path, broken_plugin: Path
) -> None:
    done = _cli("run", str(PIPELINE), "--input", TEXT, "--data-dir", str(tmp_path), extra_path=broken_plugin)

    assert done.returncode == 2
    assert (
        f"error [plugin_load_failed]: Step plug-in entry point '{BROKEN}' (group mcp_runtime.steps, "
        "distribution broken_plugin 1.0) failed to load: ModuleNotFoundError" in done.stderr
    )
    assert "Status:" not in done.stdout


def test_a_plugin_that_fails_to_import_stops_a_runtime_instance_process_naming_its_entry_point(
    redis_server: EmbeddedRedis, tmp_path: Path, broken_plugin: Path
) -> None:
    done = _cli(
        *runtime_instance_argv(redis_server.url, str(tmp_path), "plugin-host"), extra_path=broken_plugin
    )

    assert done.returncode == 2
    assert f"Step plug-in entry point '{BROKEN}'" in done.stderr and "failed to load" in done.stderr
