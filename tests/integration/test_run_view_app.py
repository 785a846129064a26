"""Issue 16.4: the run view inside MCP clients (MCP Apps, `io.modelcontextprotocol/ui`), through real
in-memory MCP client sessions on a real runtime (real Redis): `run.status` links a `ui://` resource
that renders the run's graph; another tenant's run answers exactly like an unknown one."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError

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
from mcp_runtime.apps import RUN_VIEW_TEMPLATE_URI, run_view_uri
from runtime_core.bootstrap import RuntimeServices
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.lifecycle import ArchiveOutcome, HotStateRetention
from runtime_core.pipeline import PipelineCatalog
from tests.helpers import wait_until
from tests.integration.lifecycle_support import lifecycle_runtime

ACME = Principal(name="acme-operator", user_id="otto", tenant_id="acme", roles=("operator",))
ACME_VIEWER = Principal(name="acme-viewer", user_id="vera", tenant_id="acme", roles=("viewer",))
GLOBEX = Principal(name="globex-operator", user_id="gus", tenant_id="globex", roles=("operator",))
FLAKY = {"pipeline": "flaky-retry", "input": {}, "mode": "DirectDispatch"}


@pytest.fixture(scope="module")
async def backend(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ToolBackend]:
    hot = HotStateRetention(enabled=False, grace_ms=0)  # finished runs stay hot until a test sweeps
    settings = lifecycle_runtime(
        redis_server.url, tmp_path_factory.mktemp("run-view-app"), hot, background_pump=False
    )
    async with RuntimeServices(settings) as services:
        yield ToolBackend.from_services(services, PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR))


def session(backend: ToolBackend, principal: Principal) -> Client:
    guard = ToolGuard(FixedPrincipal(principal), Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY))
    return Client(build_server(backend, guard))


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result


@pytest.fixture(scope="module")
async def finished_run(backend: ToolBackend) -> dict[str, Any]:
    """A completed flaky-retry run of tenant acme (its first step retried twice)."""
    async with session(backend, ACME) as acme:
        run_id = (await ok(acme, "submit", FLAKY)).structured_content["shared_run_id"]

        async def done() -> bool:
            return bool((await ok(acme, "run.status", {"run_id": run_id})).structured_content["done"])

        await wait_until(done, timeout=30, interval=0.05)
        return dict((await ok(acme, "run.status", {"run_id": run_id})).structured_content)


async def _read_error(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    return str(refused.value)


async def test_server_advertises_mcp_apps_and_run_status_names_the_run_view_template(
    backend: ToolBackend,
) -> None:
    async with session(backend, ACME) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        template = await client.read_resource(RUN_VIEW_TEMPLATE_URI)
        extensions = client.server_capabilities.extensions or {}
    assert EXTENSION_ID in extensions
    assert tools["run.status"].meta == {"ui": {"resourceUri": RUN_VIEW_TEMPLATE_URI}}
    assert all(tool.meta is None for name, tool in tools.items() if name != "run.status")
    content = template.contents[0]
    assert content.mime_type == APP_MIME_TYPE
    assert "Waiting for a <code>run.status</code> result" in content.text  # type: ignore[union-attr]


async def test_run_status_result_links_the_ui_resource_of_its_own_run(
    backend: ToolBackend, finished_run: dict[str, Any]
) -> None:
    async with session(backend, ACME) as acme:
        by_execution = await ok(acme, "run.status", {"run_id": finished_run["execution_id"]})
        by_shared = await ok(acme, "run.status", {"run_id": finished_run["shared_run_id"]})
    expected = run_view_uri(finished_run["shared_run_id"])
    assert by_shared.meta["ui"] == {"resourceUri": expected}
    assert by_execution.meta["ui"] == {"resourceUri": expected}  # every id of the run links one view


async def test_reading_the_linked_resource_gives_a_self_contained_html_graph_of_the_run(
    backend: ToolBackend, finished_run: dict[str, Any]
) -> None:
    async with session(backend, ACME_VIEWER) as viewer:
        read = await viewer.read_resource(run_view_uri(finished_run["shared_run_id"]))
    content = read.contents[0]
    html: str = content.text  # type: ignore[union-attr]
    assert content.mime_type == APP_MIME_TYPE
    assert html.startswith("<!doctype html>") and finished_run["shared_run_id"] in html
    nodes = dict(re.findall(r'<g class="step [^"]*" data-step="([^"]+)" data-status="([^"]+)"', html))
    assert nodes == {"flaky": "Completed", "after": "Completed"}
    assert 'data-from="flaky" data-to="after"' in html  # the dependency is drawn
    assert "retries 2" in html  # flaky's retry count is shown on its box
    assert "✓ Completed" in html  # status as text, not only as colour
    # Self-contained: no stylesheet, script or image fetched from anywhere.
    assert not re.search(r"<link\b|\bsrc=|@import|url\((?!#)", html)


async def test_another_tenant_reading_the_run_view_gets_the_unknown_run_answer(
    backend: ToolBackend, finished_run: dict[str, Any]
) -> None:
    unknown = "srun_" + "0" * 24
    async with session(backend, GLOBEX) as globex:
        foreign = await _read_error(globex, run_view_uri(finished_run["shared_run_id"]))
        missing = await _read_error(globex, run_view_uri(unknown))
        foreign_execution = await _read_error(globex, run_view_uri(finished_run["execution_id"]))
    assert "[not_found]" in foreign
    assert foreign.replace(finished_run["shared_run_id"], "<id>") == missing.replace(unknown, "<id>")
    assert foreign_execution.replace(finished_run["execution_id"], "<id>") == missing.replace(unknown, "<id>")


async def test_an_archived_run_still_shows_its_graph_from_its_terminal_snapshot(backend: ToolBackend) -> None:
    async with session(backend, ACME) as acme:
        run_id = (await ok(acme, "submit", FLAKY)).structured_content["shared_run_id"]

        async def done() -> bool:
            return bool((await ok(acme, "run.status", {"run_id": run_id})).structured_content["done"])

        await wait_until(done, timeout=30, interval=0.05)
        execution_id = (await ok(acme, "run.status", {"run_id": run_id})).structured_content["execution_id"]
        parts = backend.control_plane.parts
        assert parts.lifecycle.sweeper is not None
        assert (await parts.lifecycle.sweeper.sweep_once()).get(ArchiveOutcome.ARCHIVED.value, 0) >= 1
        assert await parts.dag_store.load_meta(execution_id) is None  # its DAG left Redis
        read = await acme.read_resource(run_view_uri(run_id))
    html: str = read.contents[0].text  # type: ignore[union-attr]
    nodes = dict(re.findall(r'<g class="step [^"]*" data-step="([^"]+)" data-status="([^"]+)"', html))
    assert nodes == {"flaky": "Completed", "after": "Completed"}
    assert 'data-from="flaky" data-to="after"' in html and "flaky-retry</strong> v1" in html
