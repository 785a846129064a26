"""Helpers for the dashboard tests: principals of two tenants with every role, a served control
plane (`mcp-runtime serve --transport http`, real subprocess) on the test redis-server, signing
in over plain HTTP, and MCP tool calls with bearer tokens."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from mcp_runtime import hash_token
from tests.e2e.mcp_support import BearerClient, clean_environment, served_http
from tests.helpers import wait_until

TOKENS = {
    "acme-operator": "acme-operator-" + secrets.token_hex(8),
    "acme-viewer": "acme-viewer-" + secrets.token_hex(8),
    "acme-admin": "acme-admin-" + secrets.token_hex(8),
    "globex-operator": "globex-operator-" + secrets.token_hex(8),
}
_PRINCIPALS = {
    "acme-operator": ("otto", "acme", "operator"),
    "acme-viewer": ("vera", "acme", "viewer"),
    "acme-admin": ("ada", "acme", "admin"),
    "globex-operator": ("gus", "globex", "operator"),
}
APPROVAL = {
    "pipeline": "human-approval",
    "input": {"candidateId": "c-1", "jobId": "j-1"},
    "mode": "DirectDispatch",
}
UNKNOWN_RUN = "srun_" + "0" * 24


def write_config(path: Path) -> Path:
    principals = {
        name: {
            "user_id": user,
            "tenant_id": tenant,
            "roles": [role],
            "token_sha256": [hash_token(TOKENS[name])],
        }
        for name, (user, tenant, role) in _PRINCIPALS.items()
    }
    path.write_text(json.dumps({"principals": principals}), encoding="utf-8")
    return path


def dashboard_environment(redis_url: str, **extra: str) -> dict[str, str]:
    """`serve` on the test Redis (own key prefix) with live streams polling fast (test speed)."""
    return clean_environment(
        REDIS_URL=redis_url,
        MCP_RUNTIME_REDIS_PREFIX=f"ui{secrets.token_hex(4)}:",
        MCP_RUNTIME_UI_RUN_POLL_MS="100",
        MCP_RUNTIME_UI_LIST_POLL_MS="200",
        **extra,
    )


@contextmanager
def served_dashboard(redis_url: str, data_dir: Path, **extra_env: str) -> Iterator[str]:
    """A served control plane for the dashboard tests; yields its base URL."""
    with served_http(
        write_config(data_dir / "server.json"), data_dir, dashboard_environment(redis_url, **extra_env)
    ) as url:
        yield url


def mcp_session(base_url: str, principal: str) -> BearerClient:
    return BearerClient(f"{base_url}/mcp", TOKENS[principal])


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def waiting_approval_run(base_url: str) -> dict[str, Any]:
    """An acme human-approval run, submitted through the MCP tools, parked on its approval step."""
    async with mcp_session(base_url, "acme-operator") as acme:
        run_id = (await call(acme, "submit", APPROVAL))["shared_run_id"]

        async def parked() -> bool:
            return (await call(acme, "run.status", {"run_id": run_id}))["control_status"] == "WaitingForInput"

        await wait_until(parked, timeout=30, interval=0.05)
        return await call(acme, "run.status", {"run_id": run_id})


def login_nonce(page_html: str) -> str:
    found = re.search(r'name="nonce" value="([^"]+)"', page_html)
    assert found is not None, page_html
    return found.group(1)


def csrf_token(page_html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page_html)
    assert found is not None, page_html
    return found.group(1)


@contextmanager
def sign_in(base_url: str, principal: str) -> Iterator[httpx.Client]:
    """An HTTP client holding a dashboard session of the principal."""
    with httpx.Client(base_url=base_url, follow_redirects=False, timeout=30) as client:
        nonce = login_nonce(client.get("/ui/login").text)
        answer = client.post(
            "/ui/login", data={"token": TOKENS[principal], "nonce": nonce, "next": "/ui/runs"}
        )
        assert answer.status_code == 303, answer.text
        yield client
