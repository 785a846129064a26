"""Helpers of the restart tests: `mcp-runtime serve --transport http` as a child process with
a token principal, an MCP client session to it, and the facts a restart must not break read
straight from Redis (executions per shared run) and from the durable store (step completions
in the ledger)."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_runtime import hash_token
from runtime_core.hot_state import HotState, find_free_port
from runtime_core.storage import SqliteDurableStore
from tests.e2e.mcp_support import serve_command, wait_for_health

TENANT = "restart-tenant"
TOKEN = "restart-operator-" + secrets.token_hex(8)
TERMINAL = {"Completed", "Failed", "Cancelled", "Rejected"}


def gated_pipeline(name: str) -> dict[str, Any]:
    """`a -> gate -> z`: `gate` waits until the file named by the run input's `gate` exists."""
    return {
        "name": name,
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {
                "name": "gate",
                "stepKey": "test.wait_for_file",
                "dependsOn": ["a"],
                "config": {"pathFromState": "gate", "maxPollMs": 20},
            },
            {"name": "z", "stepKey": "test.noop", "dependsOn": ["gate"]},
        ],
    }


def write_config(path: Path) -> Path:
    principal = {
        "user_id": "rita",
        "tenant_id": TENANT,
        "roles": ["operator"],
        "token_sha256": [hash_token(TOKEN)],
    }
    path.write_text(json.dumps({"principals": {"restart-operator": principal}}), encoding="utf-8")
    return path


@dataclass
class ServedControlPlane:
    """One `serve` child process at a time on a fixed port, data dir and environment."""

    data_dir: Path
    env: dict[str, str]
    port: int = field(default_factory=find_free_port)
    lives: int = 0
    process: subprocess.Popen[bytes] | None = None
    # Called once each later start is healthy; what it returned is kept in `seen_after_start`.
    start_hook: Callable[[], Any] | None = None
    seen_after_start: list[Any] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        config = write_config(self.data_dir / "server.json")
        return serve_command("http", self.data_dir, "--port", str(self.port), "--config", str(config))

    def start(self) -> None:
        self.lives += 1
        log = self.data_dir / f"server-{self.lives}.log"
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                self.command(), env=self.env, stdout=output, stderr=subprocess.STDOUT
            )
        wait_for_health(self.process, self.base_url, log)
        if self.start_hook is not None:
            self.seen_after_start.append(self.start_hook())

    def end(self, how: str) -> None:
        """`kill` (SIGKILL: nothing closes) or `term` (SIGTERM: the services close)."""
        assert self.process is not None
        if how == "kill":
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(timeout=30)
        self.process = None

    def stop_quietly(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


@contextmanager
def served(data_dir: Path, env: dict[str, str]) -> Iterator[ServedControlPlane]:
    plane = ServedControlPlane(data_dir, env)
    try:
        yield plane
    finally:
        plane.stop_quietly()


class McpSession:
    """An MCP client session over streamable HTTP with the operator's bearer token."""

    def __init__(self, base_url: str) -> None:
        self._http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        self._client = Client(streamable_http_client(f"{base_url}/mcp", http_client=self._http))
        self.session: Client | None = None

    async def __aenter__(self) -> McpSession:
        await self._http.__aenter__()
        self.session = await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.__aexit__(*exc)  # type: ignore[arg-type]
        await self._http.__aexit__(*exc)  # type: ignore[arg-type]

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self.session is not None
        result = await self.session.call_tool(tool, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content


@dataclass
class DoneWatch:
    """Every run.status answer seen: a run once `done` must stay done, and only ever be done
    when its shared run is dispatched to a local run whose execution ended."""

    first_done: dict[str, dict[str, Any]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    sweeps: int = 0

    def see(self, run_id: str, status: dict[str, Any]) -> None:
        if run_id in self.first_done and not status["done"]:
            self.violations.append(f"{run_id} was done, then not done: {status}")
        if not status["done"]:
            return
        ended = status["execution_status"] in TERMINAL and status["local_status"] in TERMINAL
        if status["shared_status"] != "Dispatched" or not ended:
            self.violations.append(f"{run_id} done while not terminal: {status}")
        self.first_done.setdefault(run_id, status)

    async def sweep(self, client: McpSession, run_ids: list[str], *, recheck_done: int = 10) -> int:
        """Ask run.status for every run not done yet and `recheck_done` done ones (rotating);
        returns how many runs are done."""
        self.sweeps += 1
        done = [run_id for run_id in run_ids if run_id in self.first_done]
        offset = (self.sweeps * recheck_done) % len(done) if done else 0
        sample = (done[offset:] + done[:offset])[:recheck_done]
        for run_id in [r for r in run_ids if r not in self.first_done] + sample:
            status = await client.call("run.status", {"run_id": run_id, "include_steps": False})
            self.see(run_id, status)
        return len(self.first_done)

    async def statuses(self, client: McpSession, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Every run's status now (each answer also checked)."""
        answers = {}
        for run_id in run_ids:
            answers[run_id] = await client.call("run.status", {"run_id": run_id, "include_steps": False})
            self.see(run_id, answers[run_id])
        return answers


async def executions_per_shared_run(hot_state: HotState) -> dict[str, set[str]]:
    """Every execution DAG in Redis (created, resumed or orphaned), by the shared run it serves."""
    found: dict[str, set[str]] = defaultdict(set)
    async for key in hot_state.redis.scan_iter(match=f"{hot_state.prefix}{{exec_*}}:meta", count=500):
        execution_id, shared_run_id = await hot_state.redis.hmget(key, ["execution_id", "shared_run_id"])
        found[shared_run_id or ""].add(execution_id)
    return dict(found)


async def step_completions(db_path: Path, execution_ids: list[str]) -> Counter[tuple[str, str]]:
    """`step.completed` ledger entries per (execution, step), read after the server stopped."""
    store = await SqliteDurableStore.open(db_path)
    try:
        counts: Counter[tuple[str, str]] = Counter()
        for execution_id in execution_ids:
            for entry in await store.list_ledger(TENANT, execution_id=execution_id):
                if entry.event == "step.completed":
                    counts[(execution_id, entry.step_name or "")] += 1
        return counts
    finally:
        await store.close()
