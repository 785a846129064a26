"""The example MCP server with side effects (examples/mcp-tool-server) as the tests run it.

`SideEffectsServer` starts it over streamable HTTP as a real process on a free loopback port
(stopped with the block); `stdio_entry` / `http_entry` are the providers-file entries naming
it; `Effects` reads what it did, by tool and operation id, from its effects file (shared by
every process of the server, stdio ones included). The agent tests and the docs reuse it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from runtime_core.hot_state import find_free_port
from tests.loopback import wait_until_accepting

REPOSITORY = Path(__file__).resolve().parents[1]
SERVER_SCRIPT = REPOSITORY / "examples" / "mcp-tool-server" / "side_effects_server.py"
START_TIMEOUT_S = 20


class Effects:
    """The server's record of calls: `count(tool)` effects applied, by operation id."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def effects(self, tool: str) -> Counter[str | None]:
        return Counter(e["operation_id"] for e in self.entries() if e["tool"] == tool and e["effect"])

    def calls(self, tool: str) -> Counter[str | None]:
        return Counter(e["operation_id"] for e in self.entries() if e["tool"] == tool)


def server_command(effects_file: Path, *extra: str) -> list[str]:
    return [sys.executable, str(SERVER_SCRIPT), "--effects-file", str(effects_file), *extra]


def stdio_entry(effects_file: Path, **fields: Any) -> dict[str, Any]:
    command = server_command(effects_file, "--transport", "stdio")
    return {"transport": "stdio", "command": command[0], "args": command[1:], **fields}


def http_entry(url: str, **fields: Any) -> dict[str, Any]:
    return {"transport": "http", "url": url, **fields}


@contextlib.asynccontextmanager
async def side_effects_server(
    effects_file: Path, *extra: str, env: dict[str, str] | None = None
) -> AsyncIterator[str]:
    """The server over streamable HTTP until the block ends; yields its endpoint URL."""
    port = find_free_port()
    command = server_command(effects_file, "--transport", "http", "--port", str(port), *extra)
    process = await asyncio.create_subprocess_exec(
        *command, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL
    )
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            await wait_until_accepting(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
