"""Snapshot of every MCP tool's input and output JSON schema, so answers stay stable for clients.

A deliberate schema change is recorded by regenerating the snapshot:
    MCP_REGENERATE_SCHEMAS=1 python -m pytest tests/unit/test_mcp_schemas.py
and reviewing the diff of tests/unit/mcp_tool_schemas.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

from mcp import Client

from mcp_runtime import (
    DEFAULT_PIPELINES_DIR,
    DEFAULT_RBAC_MODEL,
    DEFAULT_RBAC_POLICY,
    Authorizer,
    FixedPrincipal,
    ToolBackend,
    ToolGuard,
    build_server,
    default_server_config,
)
from runtime_core.pipeline import PipelineCatalog

SNAPSHOT = Path(__file__).with_name("mcp_tool_schemas.json")


async def _published_schemas() -> dict[str, Any]:
    # Schemas come from the tool specs alone: no runtime service is started or called.
    unused = cast(Any, None)
    backend = ToolBackend(
        catalog=PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR),
        validate_pipeline=unused,
        control_plane=unused,
        control=unused,
        replay=unused,
        audit=unused,
    )
    config = default_server_config()
    guard = ToolGuard(
        FixedPrincipal(config.principal("local-admin")), Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY)
    )
    async with Client(build_server(backend, guard)) as client:
        tools = (await client.list_tools()).tools
    return {
        tool.name: {"input": tool.input_schema, "output": tool.output_schema}
        for tool in sorted(tools, key=lambda t: t.name)
    }


async def test_every_tool_schema_matches_the_snapshot() -> None:
    published = await _published_schemas()
    if os.environ.get("MCP_REGENERATE_SCHEMAS"):
        SNAPSHOT.write_text(json.dumps(published, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    assert published == json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def _untyped_fields(schema: dict[str, Any], path: str) -> list[str]:
    """Fields whose schema says nothing about their type (no `type`, `$ref`, or typed branches)."""
    found = []
    for name, field in schema.get("properties", {}).items():
        where = f"{path}.{name}"
        branches = field.get("anyOf") or field.get("oneOf") or []
        typed = "type" in field or "$ref" in field or "const" in field or "enum" in field
        if branches:
            typed = all("type" in branch or "$ref" in branch for branch in branches)
        if not typed:
            found.append(where)
        found += _untyped_fields(field, where)
        found += _untyped_fields(field.get("items", {}), f"{where}[]")
    for name, definition in schema.get("$defs", {}).items():
        found += _untyped_fields(definition, f"{path}#{name}")
    return found


async def test_every_output_schema_field_carries_a_type() -> None:
    """What the MCP Inspector's `--strict` checks: `run.status.result` used to have no type."""
    published = await _published_schemas()
    untyped = [
        field for name, schemas in published.items() for field in _untyped_fields(schemas["output"], name)
    ]
    assert untyped == []
