"""Helpers for the MCP Tasks end-to-end tests: two `mcp-runtime serve` processes on one Redis,
and a 2025-11-25 session spoken on the wire.

The SDK's client cannot take part in 2025-11-25 Tasks: `ClientSession.send_request`
(mcp/client/session.py) validates every `tools/call` answer as a `CallToolResult`, so a
`CreateTaskResult` fails there. `LegacyWireSession` therefore speaks the streamable HTTP
transport itself (initialize, `Mcp-Session-Id`, JSON or SSE answers, answering the server's
own requests on the stream), exactly as a TypeScript / C# / Ruby client of that era does.
"""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from runtime_core.hot_state import find_free_port
from tests.e2e.mcp_support import child_process, serve_command, wait_for_health

ServerRequestHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@contextmanager
def two_servers(
    config: Path,
    data_dir: Path,
    logs: Path,
    env: dict[str, str],
    own_env: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[tuple[str, str]]:
    """Two `serve --transport http` processes sharing one Redis (env) and one data directory.

    Each gets its own control-plane host name (MCP_RUNTIME_HOST): on one machine both would
    otherwise name their local runtime instances alike (`rt_<host>:runtime-instance-1`);
    `own_env` adds variables to server "a" or "b" only.
    """
    with ExitStack() as stack:
        urls = []
        for name in ("a", "b"):
            port = find_free_port()
            command = serve_command("http", data_dir, "--port", str(port), "--config", str(config))
            log = logs / f"server-{name}.log"
            host = f"{socket.gethostname().split('.')[0]}-{name}"
            server_env = {**env, "MCP_RUNTIME_HOST": host, **(own_env or {}).get(name, {})}
            process = stack.enter_context(child_process(command, env=server_env, log=log))
            base_url = f"http://127.0.0.1:{port}"
            wait_for_health(process, base_url, log)
            urls.append(f"{base_url}/mcp")
        yield urls[0], urls[1]


class WireError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code: int = error["code"]
        self.message: str = error["message"]


class LegacyWireSession:
    """A 2025-11-25 MCP session over streamable HTTP; `on_server_request` answers the server's
    requests (e.g. `elicitation/create`) that arrive on a response stream."""

    VERSION = "2025-11-25"

    def __init__(
        self, url: str, token: str, *, on_server_request: ServerRequestHandler | None = None
    ) -> None:
        self.url = url
        self._http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self._on_server_request = on_server_request
        self._ids = itertools.count(1)
        self.session_id: str | None = None
        self.initialized: dict[str, Any] = {}

    async def __aenter__(self) -> LegacyWireSession:
        capabilities: dict[str, Any] = {"tasks": {"list": {}, "cancel": {}}}
        if self._on_server_request is not None:
            capabilities["elicitation"] = {"form": {}}
        self.initialized = await self.request(
            "initialize",
            {
                "protocolVersion": self.VERSION,
                "capabilities": capabilities,
                "clientInfo": {"name": "legacy-wire-test", "version": "1"},
            },
        )
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session_id is not None:
            await self._http.delete(self.url, headers=self._headers())
        await self._http.aclose()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session_id is not None:
            headers |= {"Mcp-Session-Id": self.session_id, "Mcp-Protocol-Version": self.VERSION}
        return headers

    async def _post(self, message: dict[str, Any]) -> None:
        response = await self._http.post(self.url, json=message, headers=self._headers())
        assert response.status_code == 202, response.text

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result of `method`; a JSON-RPC error raises WireError."""
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        async with self._http.stream("POST", self.url, json=body, headers=self._headers()) as response:
            assert response.status_code == 200, (response.status_code, await response.aread())
            self.session_id = response.headers.get("mcp-session-id", self.session_id)
            async for message in _messages(response):
                if message.get("id") == request_id and "method" not in message:
                    if "error" in message:
                        raise WireError(message["error"])
                    return message["result"]
                if "method" in message and "id" in message:
                    await self._answer(message)
        raise AssertionError(f"{method}: the stream ended without an answer")

    async def _answer(self, server_request: dict[str, Any]) -> None:
        assert self._on_server_request is not None, f"unexpected server request {server_request}"
        result = await self._on_server_request(server_request)
        await self._post({"jsonrpc": "2.0", "id": server_request["id"], "result": result})

    async def call_tool(self, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments, **extra})


async def _messages(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """JSON-RPC messages of a JSON answer or of an SSE stream (`data:` lines up to a blank line)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        yield json.loads(await response.aread())
        return
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []
