"""`mcp-runtime runtime-instance` is the CLI face of the runtime-instance process."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from runtime_core.hot_state import EmbeddedRedis
from tests.helpers import runtime_instance_argv


def test_cli_runtime_instance_without_a_control_plane_refuses_to_start(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    command = shutil.which("mcp-runtime")
    assert command is not None
    done = subprocess.run(
        [
            command,
            *runtime_instance_argv(redis_server.url, str(tmp_path), "cli-host"),
            "--discovery-timeout",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "No control plane published a discovery record" in done.stderr
