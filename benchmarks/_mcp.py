"""The benchmarks' in-memory MCP client: an admin principal over a RuntimeServices stack, and
a tool call that answers its structured content or raises with what the tool said."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client

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
from runtime_core.bootstrap import RuntimeServices
from runtime_core.pipeline import PipelineCatalog

ADMIN = Principal(name="bench-admin", user_id="bench", tenant_id="default", roles=("admin",))


def backend_of(services: RuntimeServices) -> ToolBackend:
    return ToolBackend.from_services(services, PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR))


@asynccontextmanager
async def admin_client(services: RuntimeServices) -> AsyncIterator[Client]:
    """An in-memory MCP client session of ADMIN on `services`."""
    guard = ToolGuard(FixedPrincipal(ADMIN), Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY))
    async with Client(build_server(backend_of(services), guard)) as client:
        yield client


async def call_tool(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        raise RuntimeError(f"{tool} failed: {str(result.content)[:500]}")
    return result.structured_content
