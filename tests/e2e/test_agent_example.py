"""The agent guide's example (docs/agents.md) runs offline as the page shows it: the example loopback
model server (a process), `mcp-runtime run` of examples/agents/ticket-agent.json stopping for the
approval of `file_ticket` (exit code 3, printing the `mcp-runtime input` command), and that
command, run as printed, completing the run with one ticket filed by the example MCP server
(started over stdio by the runtime) under the operation id the runtime sent."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from runtime_core.hot_state import EmbeddedRedis
from tests.e2e.mcp_support import REPOSITORY, child_process, clean_environment

DOCS = REPOSITORY / "docs" / "agents.md"
EFFECTS = Path("/tmp/mcp-runtime-agent-effects.jsonl")  # named by examples/agents/providers.json
TIMEOUT_S = 180


def _documented_commands() -> list[str]:
    [block] = re.findall(r"```bash\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    return [line for line in block.strip().splitlines() if line.strip()]


def _run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shlex.split(command),
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def _ticket_effects() -> list[dict[str, object]]:
    if not EFFECTS.exists():
        return []
    entries = [json.loads(line) for line in EFFECTS.read_text().splitlines() if line.strip()]
    return [entry for entry in entries if entry["tool"] == "create_ticket" and entry["effect"]]


def test_the_agent_guide_example_waits_for_approval_then_files_one_ticket(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    server, ready, run = _documented_commands()
    assert server.endswith("&") and "examples/agents/ticket-agent.json" in run
    env = clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_REDIS_PREFIX=f"agentdoc{tmp_path.name[-6:]}:",
        MCP_RUNTIME_DATA_DIR=str(tmp_path / "data"),
    )
    before = len(_ticket_effects())
    model = shlex.split(server.rstrip("& "))
    assert model[0] == "python"
    with child_process([sys.executable, *model[1:]], env=env, log=tmp_path / "model.log"):
        assert _run(ready, env).returncode == 0
        waiting = _run(run, env)
        assert waiting.returncode == 3, waiting.stdout + waiting.stderr
        assert "waits for input under key 'agent.approval.3'" in waiting.stdout
        assert len(_ticket_effects()) == before  # nothing filed before the approval
        [answer] = [
            line.strip()
            for line in waiting.stdout.splitlines()
            if line.strip().startswith("mcp-runtime input")
        ]
        done = _run(answer, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Status: Completed" in done.stdout
    assert "filed a priority-2 ticket for the storm warning" in done.stdout
    filed = _ticket_effects()[before:]
    assert len(filed) == 1 and str(filed[0]["operation_id"]).startswith("op_")
