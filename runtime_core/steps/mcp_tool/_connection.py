"""One pooled MCP client session to one configured server: opened on first use, kept, reopened.

Owns building the SDK client for an entry (streamable HTTP with its headers and OAuth client
credentials read from the environment on connect, or a stdio server process started by this
runtime with its environment), holding its session in a task of its own (the SDK's session
lives in the task that entered it), listing the server's tools (kept `list_ttl_s`) and
calling one. A session that broke (the server process exited, the HTTP session expired) is
opened again by the next call. Must not classify failures (`_failures`) nor choose servers
(`_servers`), and never logs or stores a secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import CallToolResult, Implementation, Tool

from runtime_core.steps._http_endpoint import secret_from_env
from runtime_core.steps.mcp_tool._settings import McpHttpServer, McpStdioServer

CLIENT_INFO = Implementation(name="mcp-runtime", version="1")


class _MemoryTokens:
    """The OAuth tokens of one connection, kept in this process only."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


class SessionUnavailable(Exception):
    """No session to the server could be opened: nothing was sent (the cause says why)."""


class McpConnection:
    """The session of one tenant's server entry in this process (`label`: `<tenant>/<name>`)."""

    def __init__(self, label: str, entry: McpHttpServer | McpStdioServer) -> None:
        self.label = label
        self.entry = entry
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._opening = asyncio.Lock()
        self._tools: tuple[float, list[Tool]] | None = None

    async def list_tools(self) -> list[Tool]:
        """The server's tools (every page), kept for `list_ttl_s`."""
        now = time.monotonic()
        if self._tools is not None and now - self._tools[0] < self.entry.list_ttl_s:
            return self._tools[1]
        client = await self._session()
        tools: list[Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        self._tools = (now, tools)
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], meta: dict[str, Any]) -> CallToolResult:
        client = await self._session()
        return await client.call_tool(
            name, arguments, read_timeout_seconds=self.entry.call_timeout_s, meta=meta
        )

    async def _session(self) -> Client:
        """The open session, opened (again) when there is none; connect failures are raised."""
        async with self._opening:
            if self._client is not None and self._holder is not None and not self._holder.done():
                return self._client
            ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
            self._closing = asyncio.Event()
            self._holder = asyncio.create_task(self._hold(ready), name=f"mcp-session {self.label}")
            try:
                async with asyncio.timeout(self.entry.connect_timeout_s):
                    self._client = await asyncio.shield(ready)
            except Exception as error:
                self._holder.cancel()
                raise SessionUnavailable(str(error)) from error
            except BaseException:
                self._holder.cancel()
                raise
            return self._client

    async def _hold(self, ready: asyncio.Future[Client]) -> None:
        try:
            async with _opened(self.entry) as client:
                ready.set_result(client)
                await self._closing.wait()
        except BaseException as error:  # the session broke or never opened: the next call reopens
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else ConnectionError(str(error)))
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self._client = None

    async def aclose(self) -> None:
        holder = self._holder
        if holder is None:
            return
        self._closing.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(holder, timeout=self.entry.connect_timeout_s)
        if not holder.done():
            holder.cancel()


@contextlib.asynccontextmanager
async def _opened(entry: McpHttpServer | McpStdioServer) -> AsyncIterator[Client]:
    if isinstance(entry, McpStdioServer):
        async with Client(_stdio_parameters(entry), client_info=CLIENT_INFO, mode="auto") as client:
            yield client
        return
    async with (
        _http_client(entry) as http,
        Client(streamable_http_client(entry.url, http_client=http), client_info=CLIENT_INFO) as client,
    ):
        yield client


def _stdio_parameters(entry: McpStdioServer) -> StdioServerParameters:
    what = f"MCP server command {entry.command}"
    secrets = {name: secret_from_env(variable, what) for name, variable in entry.env_from_env.items()}
    inherited = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return StdioServerParameters(
        command=entry.command, args=list(entry.args), env={**inherited, **entry.env, **secrets}, cwd=entry.cwd
    )


def _http_client(entry: McpHttpServer) -> httpx2.AsyncClient:
    what = f"MCP server {entry.url}"
    headers = {**entry.headers}
    headers.update(
        {name: secret_from_env(variable, what) for name, variable in entry.headers_from_env.items()}
    )
    if entry.bearer_token_env is not None:
        headers["Authorization"] = f"Bearer {secret_from_env(entry.bearer_token_env, what)}"
    auth = None
    if entry.oauth is not None:
        auth = ClientCredentialsOAuthProvider(
            server_url=entry.url,
            storage=_MemoryTokens(),
            client_id=entry.oauth.client_id,
            client_secret=secret_from_env(entry.oauth.client_secret_env, f"{what} OAuth client secret"),
            scope=" ".join(entry.oauth.scopes) or None,
            issuer=entry.oauth.issuer,
        )
    timeout = httpx2.Timeout(entry.call_timeout_s, connect=entry.connect_timeout_s)
    return httpx2.AsyncClient(headers=headers, auth=auth, timeout=timeout)
