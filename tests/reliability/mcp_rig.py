"""Shared rig of the MCP reliability tests: a runtime on the test redis-server, MCP client
sessions held open by a task of their own (so fixtures and hypothesis examples, each run in
some other task, can reuse them), an in-process HTTP client on the ASGI app, coded-error
checks and a size snapshot of the run state a call could leave behind."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from starlette.types import ASGIApp, Message

from mcp_runtime import (
    DEFAULT_PIPELINES_DIR,
    DEFAULT_RBAC_MODEL,
    DEFAULT_RBAC_POLICY,
    Authorizer,
    FixedPrincipal,
    Principal,
    ToolBackend,
    ToolGuard,
    build_server,
)
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.hot_state import HotState
from runtime_core.pipeline import PipelineCatalog

AUTHORIZER = Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY)
CODED_ERROR = re.compile(r"^\[(?P<code>[a-z_]+)\] ")
CALL_TIMEOUT_S = 20.0
_SIZE_BY_TYPE = {"hash": "HLEN", "zset": "ZCARD", "set": "SCARD", "list": "LLEN", "string": "STRLEN"}


def runtime_settings(redis_url: str, data_dir: Path, **control_plane: Any) -> RuntimeSettings:
    return RuntimeSettings(
        redis_url=redis_url,
        redis_prefix=f"rel{secrets.token_hex(4)}:",
        data_dir=data_dir,
        control_plane=ControlPlaneSettings(background_pump=False, **control_plane),
    )


def tool_backend(services: RuntimeServices) -> ToolBackend:
    return ToolBackend.from_services(services, PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR))


def server_for(backend: ToolBackend, principal: Principal) -> MCPServer:
    return build_server(backend, ToolGuard(FixedPrincipal(principal), AUTHORIZER))


T = TypeVar("T")


@asynccontextmanager
async def held(context: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
    """Enter `context` in a task of its own and keep it open: anyio scopes (an MCP session, an
    ASGI lifespan) must be exited by the task that entered them, while a pytest fixture's
    setup and teardown, like each hypothesis example, run in different tasks."""
    opened: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    close = asyncio.Event()

    async def hold() -> None:
        async with context as value:
            opened.set_result(value)
            await close.wait()

    holder = asyncio.create_task(hold())
    await asyncio.wait([opened, holder], return_when=asyncio.FIRST_COMPLETED)
    if not opened.done():
        await holder  # raises why the context could not be entered
    try:
        yield opened.result()
    finally:
        close.set()
        await holder


def held_session(server: MCPServer) -> AbstractAsyncContextManager[Client]:
    """An initialized MCP client session on `server`, usable from any task."""
    return held(Client(server))


@asynccontextmanager
async def asgi_client(app: ASGIApp) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on `app` in-process (ASGI), its lifespan run by a task of its own."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()
    lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put)
    )
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
            yield client
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await lifespan


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    return await asyncio.wait_for(client.call_tool(tool, arguments), CALL_TIMEOUT_S)


def error_text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def error_code(result: CallToolResult) -> str:
    """The `[code]` of an error result; fails the test when the text has none."""
    text = error_text(result)
    match = CODED_ERROR.match(text)
    assert match is not None, f"error without a [code]: {text[:300]!r}"
    return match["code"]


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await call(client, tool, arguments)
    assert not result.is_error, error_text(result)[:500]
    assert result.structured_content is not None
    return result.structured_content


async def failed(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await call(client, tool, arguments)
    assert result.is_error, result.structured_content
    error_code(result)
    return error_text(result)


async def run_state(hot_state: HotState) -> dict[str, int]:
    """Every key under the prefix with its size (fields, members, length): what a refused call
    must leave exactly as it found it."""
    redis = hot_state.redis
    keys = sorted([key async for key in redis.scan_iter(match=f"{hot_state.prefix}*", count=1000)])
    if not keys:
        return {}
    types = await _pipelined(hot_state, [("TYPE", key) for key in keys])
    sizes = await _pipelined(
        hot_state,
        [(_SIZE_BY_TYPE.get(str(kind), "EXISTS"), key) for key, kind in zip(keys, types, strict=True)],
    )
    return {str(key): int(size) for key, size in zip(keys, sizes, strict=True)}


async def _pipelined(hot_state: HotState, commands: list[tuple[str, str]]) -> list[Any]:
    pipe = hot_state.redis.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return list(await pipe.execute())
