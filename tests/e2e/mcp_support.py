"""Helpers for the MCP end-to-end tests: clean subprocess environments, a served HTTP
subprocess that is always terminated, an SDK client sending a bearer token, and a scan for
leftover embedded redis-servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.extension import ClientExtension
from mcp.client.streamable_http import streamable_http_client

from runtime_core.hot_state import find_free_port

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLE_CLIENTS = REPOSITORY / "examples" / "clients"
_DEPLOYMENT_VARIABLES = ("REDIS_URL", "MONGODB_URI", "MONGODB_DATABASE")


def mcp_runtime_command() -> str:
    command = shutil.which("mcp-runtime")
    assert command is not None, "the `mcp-runtime` entry point is not installed (pip install -e .)"
    return command


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without deployment settings (so the embedded default is used)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _DEPLOYMENT_VARIABLES and not key.startswith("MCP_RUNTIME_")
    }
    return {**env, **extra}


def processes_working_in(directory: Path) -> list[int]:
    """Pids of live processes whose working directory is `directory` (redis-server runs in its --dir)."""
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if cwd.readlink() == directory.resolve():
                found.append(int(cwd.parent.name))
        except OSError:
            continue
    return found


class BearerClient:
    """`async with BearerClient(url, token) as client`: an SDK client over streamable HTTP that
    sends `Authorization: Bearer <token>` (optionally with client extensions)."""

    def __init__(self, url: str, token: str, extensions: list[ClientExtension] | None = None) -> None:
        self._http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self._client = Client(streamable_http_client(url, http_client=self._http), extensions=extensions)

    async def __aenter__(self) -> Client:
        await self._http.__aenter__()
        return await self._client.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        await self._client.__aexit__(*exc)  # type: ignore[arg-type]
        await self._http.__aexit__(*exc)  # type: ignore[arg-type]


def healthy(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/healthz", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def serve_command(transport: str, data_dir: Path, *options: str) -> list[str]:
    return [mcp_runtime_command(), "serve", "--transport", transport, "--data-dir", str(data_dir), *options]


@contextmanager
def child_process(
    command: list[str], *, env: dict[str, str], log: Path, stdin: int | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Start `command` with output to `log`; always terminate it (SIGKILL if SIGTERM is ignored)."""
    with log.open("wb") as output:
        process = subprocess.Popen(command, env=env, stdin=stdin, stdout=output, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()  # the server closes its runtime services, then ends on the signal
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


@contextmanager
def served_http(
    config: Path, data_dir: Path, env: dict[str, str], *options: str, port: int | None = None
) -> Iterator[str]:
    """Run `mcp-runtime serve --transport http` on `port` (default: a free one); yields its base URL."""
    port = port or find_free_port()
    command = serve_command("http", data_dir, "--port", str(port), "--config", str(config), *options)
    with child_process(command, env=env, log=data_dir / "server.log") as process:
        base_url = f"http://127.0.0.1:{port}"
        wait_for_health(process, base_url, data_dir / "server.log")
        yield base_url


def wait_for_health(
    process: subprocess.Popen[bytes], base_url: str, log: Path, timeout_s: float = 90.0
) -> None:
    """Poll the child's /healthz until it answers; fail with its log if it dies or times out.

    The deadline is generous: a child that dies is noticed at once, and a start (imports, Redis,
    the store's migrations) can take tens of seconds on a loaded 2-core machine."""
    deadline = time.monotonic() + timeout_s
    while not healthy(base_url):
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"server did not become healthy:\n{log.read_text(errors='replace')}")
        time.sleep(0.05)  # polling another process's state: there is no event to wait on


def wait_for(condition: Callable[[], bool], *, timeout_s: float = 30.0) -> None:
    """Poll a condition about another process until it holds; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        time.sleep(0.05)  # polling another process's state: there is no event to wait on


def run_example(
    script: str, *args: str, env: dict[str, str], timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE_CLIENTS / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
