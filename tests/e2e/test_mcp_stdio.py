"""End to end over stdio: a real `mcp-runtime serve --transport stdio` subprocess on the
embedded default (its own redis-server + SQLite), driven by the SDK's client."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from mcp import Client, StdioServerParameters

from mcp_runtime import hash_token
from tests.e2e.mcp_support import (
    REPOSITORY,
    child_process,
    clean_environment,
    processes_working_in,
    run_example,
    serve_command,
    wait_for,
)


def _stdio_server(data_dir: Path, *extra: str) -> StdioServerParameters:
    command = serve_command("stdio", data_dir, *extra)
    return StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=clean_environment(),
        cwd=str(REPOSITORY),
    )


def test_stdio_example_client_runs_the_rag_pipeline_to_completion(tmp_path: Path) -> None:
    finished = run_example("stdio_client.py", "--data-dir", str(tmp_path), env=clean_environment())
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "status     Completed" in finished.stdout
    assert "as an MCP task" in finished.stdout  # the server offers Tasks: the example uses them
    assert "execution.finalized" in finished.stdout


async def test_stdio_session_runs_as_the_embedded_local_admin_of_tenant_default(tmp_path: Path) -> None:
    async with Client(_stdio_server(tmp_path)) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        listed = await client.call_tool("instances.list", {})
    assert {"submit", "queue.drain", "run.status", "ledger"} <= tools
    assert not listed.is_error and listed.structured_content is not None
    assert listed.structured_content["tenant_id"] == "default"


async def test_stdio_runs_as_the_configured_principal_and_its_roles_apply(tmp_path: Path) -> None:
    config = tmp_path / "server.json"
    viewer = {
        "user_id": "vera",
        "tenant_id": "default",
        "roles": ["viewer"],
        "token_sha256": [hash_token("t")],
    }
    config.write_text(json.dumps({"principals": {"vera": viewer}}), encoding="utf-8")
    async with Client(
        _stdio_server(tmp_path / "data", "--config", str(config), "--principal", "vera")
    ) as client:
        denied = await client.call_tool("submit", {"pipeline": "rag-final-test"})
        listed = await client.call_tool("pipelines.list", {})
    assert (
        denied.is_error and "role(s) [viewer] in tenant 'default' lack 'run:submit'" in denied.content[0].text
    )  # type: ignore[union-attr]
    assert not listed.is_error


def test_stdio_server_exits_cleanly_when_stdin_closes_and_stops_its_embedded_redis(tmp_path: Path) -> None:
    command = serve_command("stdio", tmp_path)
    with child_process(
        command, env=clean_environment(), log=tmp_path / "log", stdin=subprocess.PIPE
    ) as server:
        wait_for(lambda: bool(processes_working_in(tmp_path / "redis")))
        assert server.stdin is not None
        server.stdin.close()
        assert server.wait(timeout=15) == 0
    assert processes_working_in(tmp_path / "redis") == []


def test_stdio_server_on_sigterm_closes_its_services_and_ends_with_the_signal(tmp_path: Path) -> None:
    command = serve_command("stdio", tmp_path)
    with child_process(
        command, env=clean_environment(), log=tmp_path / "log", stdin=subprocess.PIPE
    ) as server:
        wait_for(lambda: bool(processes_working_in(tmp_path / "redis")))
        server.terminate()
        assert server.wait(timeout=15) == -signal.SIGTERM
    assert processes_working_in(tmp_path / "redis") == []
