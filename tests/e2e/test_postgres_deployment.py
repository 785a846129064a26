"""Processes pointed at PostgreSQL by MCP_RUNTIME_DURABLE_URL, as on several hosts: a `serve`
control plane and a `runtime-instance` process (each with a data directory of its own, sharing
Redis and one new scratch database, started at once: one of them migrates it) complete a run; a
second control plane, on another data directory, answers that run's ledger from the shared
store. No process keeps a SQLite durable file, each one's readiness wrote to PostgreSQL, and
the password given in MCP_RUNTIME_DURABLE_PASSWORD is in no log.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from mcp import Client

from mcp_runtime import hash_token
from runtime_core.hot_state import EmbeddedRedis, find_free_port
from runtime_core.storage import SQLITE_FILE_NAME
from tests.e2e.mcp_support import (
    BearerClient,
    child_process,
    clean_environment,
    mcp_runtime_command,
    serve_command,
    wait_for,
    wait_for_health,
)
from tests.helpers import wait_until
from tests.postgres import conninfo_of, database_url, scratch_database

TOKEN = "pg-operator-" + secrets.token_hex(8)
TENANT = "pg-tenant"
SECRET = "durable-Password-" + secrets.token_hex(6)
RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}
HOST_ID = "pg-host"


def _write_config(path: Path) -> Path:
    principal = {
        "user_id": "pat",
        "tenant_id": TENANT,
        "roles": ["operator"],
        "token_sha256": [hash_token(TOKEN)],
    }
    path.write_text(json.dumps({"principals": {"pg-operator": principal}}), encoding="utf-8")
    return path


def _runtime_instance(env: dict[str, str], data_dir: Path, port: int) -> list[str]:
    return [
        mcp_runtime_command(), "runtime-instance", "--transport", "http", "--port", str(port),
        "--tenant", TENANT, "--host-id", HOST_ID, "--data-dir", str(data_dir),
        "--redis-url", env["REDIS_URL"], "--redis-prefix", env["MCP_RUNTIME_REDIS_PREFIX"],
        "--heartbeat-ms", "200", "--discovery-timeout", "90",  # the control planes start meanwhile
    ]  # fmt: skip


async def _ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture
def database(postgres_server: None) -> Iterator[str]:
    with scratch_database("mcprt_e2e") as name:
        yield name


def _rows(name: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo_of(name), autocommit=True) as db:
        return db.execute(sql, params).fetchall()


def _ready(base_url: str) -> dict[str, Any]:
    reply = httpx.get(f"{base_url}/readyz", timeout=10)
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_serve_and_runtime_instance_processes_share_the_postgresql_store(
    redis_server: EmbeddedRedis, database: str, tmp_path: Path
) -> None:
    env = clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_REDIS_PREFIX=f"pg{secrets.token_hex(4)}:",
        MCP_RUNTIME_DURABLE_URL=database_url(database),
        MCP_RUNTIME_DURABLE_PASSWORD=SECRET,
        MCP_RUNTIME_LOCAL_INSTANCES="0",  # runs go to the runtime-instance process
        MCP_RUNTIME_SCALE_OUT="false",
    )
    dirs = {name: tmp_path / name for name in ("first", "second", "instance")}
    config = _write_config(tmp_path / "server.json")
    ports = {name: find_free_port() for name in dirs}
    commands = {
        name: serve_command("http", dirs[name], "--port", str(ports[name]), "--config", str(config))
        for name in ("first", "second")
    }
    commands["instance"] = _runtime_instance(env, dirs["instance"], ports["instance"])
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    with ExitStack() as stack:
        started = []
        for name, command in commands.items():  # all at once: the database is new, one migrates it
            dirs[name].mkdir()
            own_env = {**env, "MCP_RUNTIME_HOST": f"pg-{name}"}
            log = dirs[name] / "process.log"
            started.append(
                (stack.enter_context(child_process(command, env=own_env, log=log)), urls[name], log)
            )
        for process, url, log in started:
            await asyncio.to_thread(wait_for_health, process, url, log, 90)
        async with BearerClient(f"{urls['first']}/mcp", TOKEN) as client:
            run_id = (await _ok(client, "submit", RAG))["shared_run_id"]

            async def done() -> bool:
                return bool((await _ok(client, "run.status", {"run_id": run_id}))["done"])

            await wait_until(done, timeout=60, interval=0.1)
            status = await _ok(client, "run.status", {"run_id": run_id})
        readiness = [_ready(url) for url in urls.values()]
        async with BearerClient(f"{urls['second']}/mcp", TOKEN) as client:

            async def finalized_in_the_ledger() -> bool:  # the ledger is written in batches, behind
                nonlocal ledger
                ledger = await _ok(client, "ledger", {"run_id": run_id})
                return "execution.finalized" in {entry["event"] for entry in ledger["entries"]}

            ledger: dict[str, Any] = {}
            await wait_until(finalized_in_the_ledger, timeout=30, interval=0.1)

    assert status["execution_status"] == "Completed"
    assert status["assigned_runtime_instance_id"].startswith(f"rt_{HOST_ID}")
    stored = dict(_rows(database, "SELECT entry_id, event FROM ledger WHERE shared_run_id = %s", (run_id,)))
    assert {entry["entry_id"]: entry["event"] for entry in ledger["entries"]}.items() <= stored.items()
    # Only the runtime-instance process runs steps here: their events reached PostgreSQL from it.
    assert {"execution.finalized", "step.completed"} <= {entry["event"] for entry in ledger["entries"]}
    assert all(r["checks"]["durable_store"]["ok"] for r in readiness)
    assert _rows(database, "SELECT count(*) FROM health_probes") == [(1,)]
    assert [d.name for d in dirs.values() if (d / SQLITE_FILE_NAME).exists()] == []
    logs = [(d / "process.log").read_text(errors="replace") for d in dirs.values()]
    assert all("durable_store.opened store=postgresql" in text for text in logs)
    assert sum("durable_store.migrated versions=1" in text for text in logs) == 1
    assert not [text for text in logs if SECRET in text]


def test_a_control_plane_on_an_unreachable_postgresql_exits_2_with_a_typed_error(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    env = clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_REDIS_PREFIX=f"pg{secrets.token_hex(4)}:",
        MCP_RUNTIME_DURABLE_URL=f"postgresql://app@127.0.0.1:{find_free_port()}/runtime",
        MCP_RUNTIME_DURABLE_PASSWORD=SECRET,
        MCP_RUNTIME_DURABLE_TIMEOUT_MS="500",
    )
    config = _write_config(tmp_path / "server.json")
    command = serve_command("http", tmp_path, "--port", str(find_free_port()), "--config", str(config))
    log = tmp_path / "serve.log"
    with child_process(command, env=env, log=log) as process:
        wait_for(lambda: process.poll() is not None, timeout_s=60)
    output = log.read_text(errors="replace")
    assert process.returncode == 2, output
    assert "error [store_unavailable]: PostgreSQL durable store is unavailable" in output
    assert SECRET not in output and "Traceback" not in output
