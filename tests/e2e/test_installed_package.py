"""Issue 13.9: a non-editable install runs from any directory.

Builds the wheel from a copy of the repository's build inputs, installs it (no dependencies,
no index: they come from the test runner's own environment, named by a `.pth` file after the
fresh venv's site-packages, so the wheel's copy comes first) into a fresh venv, and from an
empty temporary directory, with no PYTHONPATH and a private
HOME, runs `mcp-runtime run` on a pipeline shipped inside the wheel and a stdio `serve`
session that submits the catalog's RAG pipeline and sees it complete. The Lua scripts, the
RBAC model / policy and the pipeline catalog must all come from the installed package, and
the data directory defaults to the per-user one, never the current directory. About 30 s:
the build, the venv and three process starts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.e2e.mcp_support import processes_working_in, wait_for
from tests.helpers import wait_until

REPOSITORY = Path(__file__).resolve().parents[2]
BUILD_INPUTS = [
    "pyproject.toml",
    "setup.py",
    "README.md",
    "mcp_runtime",
    "runtime_core",
    "lua",
    "rbac_policies",
]
SHIPPED_PIPELINES = "examples/pipelines"
RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}


@dataclass(frozen=True)
class Installed:
    venv: Path
    site_packages: Path
    workdir: Path  # an empty directory to run from
    home: Path

    @property
    def command(self) -> str:
        return str(self.venv / "bin" / "mcp-runtime")

    def environment(self) -> dict[str, str]:
        """No PYTHONPATH (nothing of the checkout), no deployment settings, a private HOME."""
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"PYTHONPATH", "REDIS_URL", "MONGODB_URI", "XDG_DATA_HOME"}
            and not key.startswith("MCP_RUNTIME_")
        }
        return {**env, "HOME": str(self.home)}

    @property
    def default_data_dir(self) -> Path:
        return self.home / ".local" / "share" / "mcp-runtime"


def _copy_build_inputs(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in BUILD_INPUTS:
        source = REPOSITORY / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        else:
            shutil.copy2(source, target / name)
    shutil.copytree(REPOSITORY / SHIPPED_PIPELINES, target / SHIPPED_PIPELINES)


def _run(*command: str | Path, **options: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=300, check=False, **options
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("installed")
    source, dist, venv = root / "source", root / "dist", root / "venv"
    source.mkdir()
    _copy_build_inputs(source)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, source)
    [wheel] = dist.glob("mcp_runtime-*.whl")
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel)
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    # The dependencies: the runner's site-packages as a site directory, so its .pth files (the
    # step plug-in's editable install) work too; the wheel's own copy of the package comes first.
    runner = sysconfig.get_paths()["purelib"]
    (Path(site) / "runner-dependencies.pth").write_text(f"import site; site.addsitedir({runner!r})\n")
    workdir, home = root / "work", root / "home"
    workdir.mkdir()
    home.mkdir()
    yield Installed(venv, Path(site), workdir, home)


def test_the_installed_package_imports_its_code_and_data_from_the_venv(installed: Installed) -> None:
    probe = (
        "import json, mcp_runtime, runtime_core.hot_state as h, mcp_runtime._config as c;"
        "print(json.dumps([mcp_runtime.__file__, str(h.LUA_DIR), str(c.DEFAULT_RBAC_MODEL),"
        " str(c.DEFAULT_PIPELINES_DIR)]))"
    )
    done = _run(
        installed.venv / "bin" / "python", "-c", probe, cwd=installed.workdir, env=installed.environment()
    )
    code, lua, rbac, pipelines = (Path(p) for p in json.loads(done.stdout))
    for path in (code, lua, rbac, pipelines):
        assert path.is_relative_to(installed.site_packages), path
    assert len(list(lua.glob("*.lua"))) == len(list((REPOSITORY / "lua").glob("*.lua")))
    assert rbac.is_file() and len(list(pipelines.glob("*.json"))) >= 4


def test_mcp_runtime_run_completes_a_shipped_pipeline_from_an_empty_directory(installed: Installed) -> None:
    pipeline = installed.site_packages / "mcp_runtime" / "pipelines" / "fan-out.json"
    done = _run(installed.command, "run", pipeline, cwd=installed.workdir, env=installed.environment())
    assert "Status: Completed" in done.stdout, done.stdout + done.stderr
    assert list(installed.workdir.iterdir()) == []  # nothing written where it was started
    assert (installed.default_data_dir / "runtime.db").is_file()
    assert processes_working_in(installed.default_data_dir / "redis") == []


async def test_a_stdio_serve_session_from_an_empty_directory_runs_the_catalog_rag_pipeline(
    installed: Installed,
) -> None:
    data_dir = installed.home / "serve-data"
    server = StdioServerParameters(
        command=installed.command,
        args=["serve", "--transport", "stdio", "--data-dir", str(data_dir)],
        env=installed.environment(),
        cwd=str(installed.workdir),
    )
    async with Client(server) as client:
        listed = await client.call_tool("pipelines.list", {})
        submitted = await client.call_tool("submit", RAG)
        assert not submitted.is_error and submitted.structured_content is not None
        run_id = submitted.structured_content["shared_run_id"]
        statuses: list[dict[str, object]] = []

        async def finished() -> bool:
            status = await client.call_tool("run.status", {"run_id": run_id})
            assert not status.is_error and status.structured_content is not None
            statuses.append(status.structured_content)
            return bool(status.structured_content["done"])

        await wait_until(finished, timeout=60, interval=0.1)
    assert listed.structured_content is not None
    names = {p["name"] for p in listed.structured_content["pipelines"]}
    assert {"rag-final-test", "fan-out", "human-approval", "flaky-retry"} <= names
    assert statuses[-1]["execution_status"] == "Completed"
    assert list(installed.workdir.iterdir()) == []
    wait_for(lambda: processes_working_in(data_dir / "redis") == [])  # its redis-server stopped too
