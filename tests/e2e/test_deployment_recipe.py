"""The multi-process recipe of docs/operations.md, run as written (issue 29.6).

The recipe's bash block is taken from the page and run by bash from the repository root with only
its ports (6399, 8765, 8801) and its directory (/tmp/rt) swapped for free ports and a scratch
directory; the gRPC variant swaps steps 3 and 4 for the page's gRPC block. It must finish on its
own: a readiness wait that never ends (the gRPC process polled over HTTP) fails here by the test's
timeout. The run must land on the tenant's instances named from the tenants file the recipe exports.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from runtime_core.hot_state import find_free_port
from tests.e2e.mcp_support import REPOSITORY, clean_environment

PAGE = REPOSITORY / "docs" / "operations.md"
RECIPE_TIMEOUT_S = 240


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


def recipe(transport: str) -> str:
    blocks = _bash_blocks(PAGE.read_text(encoding="utf-8"))
    [whole] = [b for b in blocks if "# 1. a Redis" in b]
    if transport == "http":
        return whole
    [grpc_steps] = [b for b in blocks if "--transport grpc" in b and "# 1." not in b]
    steps_3_and_4 = re.compile(
        r"^mcp-runtime runtime-instance --transport http.*?^mcp-runtime wait-ready[^\n]*\n", flags=re.S | re.M
    )
    assert steps_3_and_4.search(whole), "the recipe's steps 3 and 4 moved: update this test"
    return steps_3_and_4.sub(lambda _: grpc_steps, whole)


def _stop_everything(process: subprocess.Popen[bytes], redis_port: int) -> None:
    """Whatever happened: the recipe's processes (one session) and its redis-server (daemonized out
    of the session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    stop_redis = ["redis-cli", "-p", str(redis_port), "shutdown", "nosave"]
    subprocess.run(stop_redis, capture_output=True, check=False)


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_the_multi_process_recipe_runs_a_tenant_run_on_the_tenants_own_instances(
    transport: str, tmp_path: Path
) -> None:
    redis_port, plane_port, instance_port = find_free_port(), find_free_port(), find_free_port()
    script = (
        recipe(transport)
        .replace("6399", str(redis_port))
        .replace("8765", str(plane_port))
        .replace("8801", str(instance_port))
        .replace("/tmp/rt", str(tmp_path / "rt"))
    )
    env = clean_environment(MCP_RUNTIME_HOST=f"recipe-{os.getpid()}-{transport}")
    log = tmp_path / "recipe.log"
    with log.open("w") as output_file:  # a file, not a pipe: background processes keep a pipe open
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=REPOSITORY,
            env=env,
            stdout=output_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            process.wait(timeout=RECIPE_TIMEOUT_S)
        finally:
            _stop_everything(process, redis_port)
    output = log.read_text(encoding="utf-8", errors="replace")
    assert process.returncode == 0, output[-4000:]
    assert f"ready: http://127.0.0.1:{plane_port}" in output
    scheme = "grpc" if transport == "grpc" else "http"
    assert f"ready: {scheme}://127.0.0.1:{instance_port}" in output
    assert "instance   rt_host-a:tenant-a-runtime-" in output, output[-4000:]
    assert "status     Completed" in output
