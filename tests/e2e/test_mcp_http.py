"""End to end over streamable HTTP: a real `mcp-runtime serve --transport http` subprocess
with bearer-token principals from a config file, on the test redis-server."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from mcp_runtime import hash_token
from runtime_core.hot_state import connect_hot_state, find_free_port
from runtime_core.instances import InstanceRegistry, TenantSettingsCatalog
from tests.conftest import REDIS_KINDS, RedisTarget
from tests.e2e.mcp_support import (
    BearerClient,
    child_process,
    clean_environment,
    processes_working_in,
    run_example,
    serve_command,
    served_http,
    wait_for_health,
)
from tests.helpers import wait_until

ACME_TOKEN = "acme-operator-" + secrets.token_hex(8)
ACME_ADMIN_TOKEN = "acme-admin-" + secrets.token_hex(8)
GLOBEX_TOKEN = "globex-operator-" + secrets.token_hex(8)
RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}


def _write_config(path: Path) -> Path:
    def principal(user: str, tenant: str, role: str, token: str) -> dict[str, Any]:
        return {"user_id": user, "tenant_id": tenant, "roles": [role], "token_sha256": [hash_token(token)]}

    path.write_text(
        json.dumps(
            {
                "principals": {
                    "acme-operator": principal("otto", "acme", "operator", ACME_TOKEN),
                    "acme-admin": principal("ada", "acme", "admin", ACME_ADMIN_TOKEN),
                    "globex-operator": principal("gus", "globex", "operator", GLOBEX_TOKEN),
                }
            }
        ),
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def prefix() -> str:
    return f"mcphttp{secrets.token_hex(4)}:"


@pytest.fixture(scope="module", params=REDIS_KINDS)
def server_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, prefix: str
) -> Iterator[str]:
    """One served control plane per kind of Redis: every test using it runs on both."""
    redis = request.getfixturevalue("redis_cluster" if request.param == "cluster" else "redis_server")
    data_dir = tmp_path_factory.mktemp("mcp-http")
    env = clean_environment(REDIS_URL=redis.url, MCP_RUNTIME_REDIS_PREFIX=prefix)
    with served_http(_write_config(data_dir / "server.json"), data_dir, env) as base_url:
        yield base_url


def _session(base_url: str, token: str) -> BearerClient:
    return BearerClient(f"{base_url}/mcp", token)


async def _ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def _completed_run(client: Client) -> dict[str, Any]:
    run_id = (await _ok(client, "submit", RAG))["shared_run_id"]
    await _ok(client, "queue.drain", {"max_count": 20})

    async def done() -> bool:
        return bool((await _ok(client, "run.status", {"run_id": run_id}))["done"])

    await wait_until(done, timeout=30, interval=0.05)
    return await _ok(client, "run.status", {"run_id": run_id})


def _initialize(base_url: str, headers: dict[str, str]) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(f"{base_url}/mcp", json=body, headers={**accept, **headers}, timeout=10)


def test_request_without_a_token_is_401(server_url: str) -> None:
    assert _initialize(server_url, {}).status_code == 401


def test_request_with_a_wrong_token_is_401(server_url: str) -> None:
    assert _initialize(server_url, {"Authorization": "Bearer not-a-configured-token"}).status_code == 401


def test_request_with_a_valid_api_key_header_is_accepted(server_url: str) -> None:
    assert _initialize(server_url, {"X-API-Key": ACME_TOKEN}).status_code == 200


def test_health_endpoints_need_no_token(server_url: str) -> None:
    ready = httpx.get(f"{server_url}/healthz", timeout=5)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert httpx.get(f"{server_url}/livez", timeout=5).json()["status"] == "alive"


def test_http_example_client_runs_the_rag_pipeline_to_completion(server_url: str) -> None:
    finished = run_example(
        "http_client.py", "--url", f"{server_url}/mcp", "--token", ACME_TOKEN, env=clean_environment()
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "status     Completed" in finished.stdout and "tenant acme" in finished.stdout
    assert "as an MCP task" in finished.stdout  # the server offers Tasks: the example uses them


async def test_valid_token_submits_the_rag_pipeline_and_sees_it_complete(server_url: str) -> None:
    async with _session(server_url, ACME_TOKEN) as acme:
        status = await _completed_run(acme)
    assert (status["tenant_id"], status["execution_status"]) == ("acme", "Completed")
    assert status["result"]["data"]["context"]


async def test_token_principal_roles_apply_per_call(server_url: str) -> None:
    async with _session(server_url, ACME_TOKEN) as acme:
        denied = await acme.call_tool("instances.list", {})
    async with _session(server_url, ACME_ADMIN_TOKEN) as admin:
        listed = await _ok(admin, "instances.list", {})
    assert denied.is_error and "lack 'instance:read'" in denied.content[0].text  # type: ignore[union-attr]
    assert listed["tenant_id"] == "acme" and listed["instances"]


@pytest.mark.parametrize(
    ("tool", "field", "id_kind"),
    [
        ("run.status", "run_id", "shared_run_id"),
        ("run.status", "run_id", "local_run_id"),
        ("run.status", "run_id", "execution_id"),
        ("ledger", "run_id", "shared_run_id"),
        ("ledger", "run_id", "execution_id"),
        ("trace", "run_id", "execution_id"),
        ("replay", "execution_id", "execution_id"),
    ],
)
async def test_other_tenant_reads_of_a_completed_run_answer_not_found(
    server_url: str, tool: str, field: str, id_kind: str
) -> None:
    async with _session(server_url, ACME_TOKEN) as acme, _session(server_url, GLOBEX_TOKEN) as globex:
        run = await _completed_run(acme)
        foreign = await globex.call_tool(tool, {field: run[id_kind]})
        own = await acme.call_tool(tool, {field: run[id_kind]})
    assert foreign.is_error and "[not_found]" in foreign.content[0].text  # type: ignore[union-attr]
    assert not own.is_error


async def test_other_tenant_forensics_and_drain_show_none_of_its_runs(server_url: str) -> None:
    async with _session(server_url, ACME_TOKEN) as acme, _session(server_url, GLOBEX_TOKEN) as globex:
        run_id = (await _ok(acme, "submit", RAG))["shared_run_id"]
        drained = await _ok(globex, "queue.drain", {"max_count": 20})
        forensics = await _ok(globex, "forensics", {})
    assert run_id not in {run["shared_run_id"] for run in drained["runs"]}
    assert forensics["records"] == []


@pytest.mark.redis_kinds("single", "cluster")
async def test_sigterm_shuts_down_cleanly_and_unregisters_the_instances(
    redis_target: RedisTarget, tmp_path: Path
) -> None:
    prefix = f"mcpstop{secrets.token_hex(4)}:"
    env = clean_environment(REDIS_URL=redis_target.url, MCP_RUNTIME_REDIS_PREFIX=prefix)
    with served_http(_write_config(tmp_path / "server.json"), tmp_path, env):
        registry = InstanceRegistry(
            connect_hot_state(redis_target.url, prefix=prefix), TenantSettingsCatalog()
        )
        assert await registry.entries()
    assert await registry.entries() == []
    await registry.hot_state.close()


def test_embedded_default_http_server_stops_its_redis_on_sigterm(tmp_path: Path) -> None:
    port = find_free_port()
    config = _write_config(tmp_path / "server.json")
    command = serve_command("http", tmp_path, "--port", str(port), "--config", str(config))
    with child_process(command, env=clean_environment(), log=tmp_path / "server.log") as server:
        wait_for_health(server, f"http://127.0.0.1:{port}", tmp_path / "server.log")
        assert processes_working_in(tmp_path / "redis")
        server.terminate()
        assert server.wait(timeout=15) == -signal.SIGTERM
    assert processes_working_in(tmp_path / "redis") == []


def test_wait_for_health_reports_the_server_log_when_the_server_dies(tmp_path: Path) -> None:
    log = tmp_path / "dead.log"
    log.write_text("boom", encoding="utf-8")
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=10)
    with pytest.raises(AssertionError, match="boom"):
        wait_for_health(dead, "http://127.0.0.1:1", log, timeout_s=1)
