"""Issue 16.3 in a real browser: Playwright driving Debian's Chromium against a served control
plane (real subprocess, real redis-server), runs submitted through real MCP sessions.

An operator signs in with a token, sees a submitted run appear in the live list, watches the
DAG's step colours change to Completed while the page stays open, and answers a human-approval
gate from the page; another tenant's session gets the unknown-run page for that run; a viewer
gets no action button. Screenshots of the list and the run page are saved in the test's tmp dir
(MCP_RUNTIME_UPDATE_DOCS_IMAGES=1 also refreshes docs/images/run-page.png for the README).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from mcp_runtime.apps import RUN_VIEW_TEMPLATE_URI
from runtime_core.hot_state import EmbeddedRedis
from tests.e2e.conftest import LAPTOP
from tests.e2e.dashboard_support import (
    TOKENS,
    UNKNOWN_RUN,
    call,
    mcp_session,
    served_dashboard,
    waiting_approval_run,
)
from tests.e2e.mcp_support import REPOSITORY

COMPLETED_FILL = "rgb(218, 251, 225)"  # tone-success
WAITING_FOR_INPUT_FILL = "rgb(251, 239, 255)"  # tone-attention
DOCS_IMAGE = REPOSITORY / "docs" / "images" / "run-page.png"
DOCS_IMAGE_SIZE = {"width": 1366, "height": 1640}


@pytest.fixture(scope="module")
def base_url(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_dashboard(redis_server.url, tmp_path_factory.mktemp("dashboard-browser")) as url:
        yield url


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dashboard-screenshots")


async def _signed_in_page(browser: Browser, base_url: str, principal: str, path: str = "/ui/runs") -> Page:
    page = await (await browser.new_context(viewport=LAPTOP, base_url=base_url)).new_page()
    page.on(
        "console",
        lambda message: _console_errors(page).append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: _console_errors(page).append(str(error)))
    await page.goto(path)
    await expect(page).to_have_url(f"{base_url}/ui/login?next={path.replace('/', '%2F')}")
    await page.get_by_label("Access token").fill(TOKENS[principal])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(f"{base_url}{path}")
    return page


_ERRORS: dict[int, list[str]] = {}


def _console_errors(page: Page) -> list[str]:
    """What the page reported as errors: script errors, refused loads, Content-Security-Policy violations."""
    return _ERRORS.setdefault(id(page), [])


def _node(page: Page, step: str) -> Any:
    return page.locator(f'svg.dag g.step[data-step="{step}"]')


async def _fill(page: Page, step: str) -> str:
    return await _node(page, step).locator("rect").evaluate("rect => getComputedStyle(rect).fill")


async def test_operator_watches_the_dag_turn_completed_live_and_answers_the_gate_from_the_page(
    browser: Browser, base_url: str, artifacts: Path
) -> None:
    page = await _signed_in_page(browser, base_url, "acme-operator")
    watched = await waiting_approval_run(base_url)
    answered_here = await waiting_approval_run(base_url)

    # The runs list refreshes itself: both runs appear without a reload.
    await expect(page.locator(f'tr[data-run="{answered_here["shared_run_id"]}"]')).to_be_visible()
    await expect(page.locator(f'tr[data-run="{watched["shared_run_id"]}"]')).to_be_visible()
    await page.screenshot(path=artifacts / "runs-list.png", full_page=True)

    # Watch a run while someone else answers its gate through the MCP tools: the page is not
    # reloaded (its marker survives), the colours follow the server-sent events.
    await page.goto(f"/ui/runs/{watched['shared_run_id']}")
    await expect(_node(page, "approval")).to_have_attribute("data-status", "WaitingForInput")
    assert await _fill(page, "approval") == WAITING_FOR_INPUT_FILL
    assert await _fill(page, "score") == COMPLETED_FILL
    await page.evaluate("window.__stillTheSamePage = true")
    async with mcp_session(base_url, "acme-operator") as acme:
        await call(
            acme,
            "input.submit",
            {
                "execution_id": watched["execution_id"],
                "waiting_key": "hire-approval",
                "payload": {"approved": True},
            },
        )
    await expect(_node(page, "approval")).to_have_attribute("data-status", "Completed")
    await expect(_node(page, "approval").locator(".step-status")).to_have_text("✓ Completed")
    await expect(page.locator("#run-status")).to_have_text("✓ Completed")
    for step in ("candidate", "job", "score", "approval"):
        assert await _fill(page, step) == COMPLETED_FILL
    assert await page.evaluate("window.__stillTheSamePage") is True

    # Answer the other run's gate from the page itself.
    await page.goto(f"/ui/runs/{answered_here['shared_run_id']}")
    await expect(page.get_by_role("heading", name="Input needed by step approval")).to_be_visible()
    await page.screenshot(path=artifacts / "run-page-waiting.png", full_page=True)
    if os.environ.get("MCP_RUNTIME_UPDATE_DOCS_IMAGES"):  # the README's picture: the run page's top
        DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=DOCS_IMAGE, full_page=True, clip={"x": 0, "y": 0, **DOCS_IMAGE_SIZE})
    await page.get_by_role("radio", name="Yes").check()
    await page.get_by_label("Comment").fill("Approved in the browser test")
    await page.get_by_role("button", name="Send answer").click()
    await expect(page.locator(".notice")).to_contain_text("Answer sent under key 'hire-approval'")
    await expect(_node(page, "approval")).to_have_attribute("data-status", "Completed")
    await expect(page.locator("#run-status")).to_have_text("✓ Completed")
    await expect(page.locator("#timeline svg.timeline")).to_be_visible()
    await expect(page.locator("#ledger")).to_contain_text("execution.finalized")
    await page.screenshot(path=artifacts / "run-page.png", full_page=True)
    async with mcp_session(base_url, "acme-operator") as acme:
        status = await call(acme, "run.status", {"run_id": answered_here["shared_run_id"]})
    assert status["execution_status"] == "Completed" and status["result"]["data"]["approved"] is True
    assert _console_errors(page) == []  # no CSP violation, no failed load, no script error
    await page.context.close()


async def test_another_tenant_gets_the_unknown_run_page_for_a_foreign_run(
    browser: Browser, base_url: str
) -> None:
    run = await waiting_approval_run(base_url)
    page = await _signed_in_page(browser, base_url, "globex-operator")
    foreign = await page.goto(f"/ui/runs/{run['shared_run_id']}")
    foreign_text = (await page.locator("main").inner_text()).replace(run["shared_run_id"], "<id>")
    unknown = await page.goto(f"/ui/runs/{UNKNOWN_RUN}")
    unknown_text = (await page.locator("main").inner_text()).replace(UNKNOWN_RUN, "<id>")
    assert foreign is not None and unknown is not None and foreign.status == unknown.status == 404
    assert foreign_text == unknown_text and "[not_found]" in foreign_text
    await expect(page.locator("svg.dag")).to_have_count(0)
    await page.context.close()
    async with mcp_session(base_url, "acme-operator") as acme:
        await acme.call_tool("cancel", {"run_id": run["shared_run_id"]})


async def test_a_viewer_sees_the_run_with_no_action_button(browser: Browser, base_url: str) -> None:
    run = await waiting_approval_run(base_url)
    page = await _signed_in_page(browser, base_url, "acme-viewer", f"/ui/runs/{run['shared_run_id']}")
    await expect(_node(page, "approval")).to_have_attribute("data-status", "WaitingForInput")
    await expect(page.get_by_text("can view this run but not act on it")).to_be_visible()
    for name in ("Cancel run", "Pause", "Resume", "Send answer"):
        await expect(page.get_by_role("button", name=name)).to_have_count(0)
    await expect(page.locator('form[action*="/ui/runs/"]')).to_have_count(0)
    # Keyboard first: the first Tab reaches the skip link, which moves focus to the content.
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    await page.context.close()
    async with mcp_session(base_url, "acme-operator") as acme:
        await acme.call_tool("cancel", {"run_id": run["shared_run_id"]})


# A loopback MCP Apps host: it renders the server's app template in a sandboxed iframe and speaks
# the MCP Apps wire format to it (JSON-RPC 2.0 over postMessage): it answers `ui/initialize`,
# then sends the `run.status` result as `ui/notifications/tool-result`, and proxies the view's
# `resources/read` to the real server (through `mcpReadResource`, an MCP client session).
MCP_APPS_HOST = """<!doctype html>
<html><body>
<iframe id="view" sandbox="allow-scripts" title="run view" width="1200" height="700"></iframe>
<script>
window.received = [];
window.startHost = (template, toolResult) => {
  const view = document.getElementById("view");
  const send = (message) => view.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");
  window.addEventListener("message", async (event) => {
    if (event.source !== view.contentWindow) return;
    const message = event.data;
    window.received.push(message.method);
    if (message.method === "ui/initialize") {
      send({ id: message.id, result: { protocolVersion: message.params.protocolVersion,
        hostInfo: { name: "loopback-host", version: "1" }, hostContext: {},
        hostCapabilities: { serverResources: {} } } });
    } else if (message.method === "ui/notifications/initialized") {
      send({ method: "ui/notifications/tool-result", params: toolResult });
    } else if (message.method === "resources/read") {
      send({ id: message.id, result: await window.mcpReadResource(message.params.uri) });
    }
  });
  view.srcdoc = template;
};
</script>
</body></html>"""


async def test_an_mcp_apps_host_shows_the_run_its_run_status_result_links(
    browser: Browser, base_url: str
) -> None:
    run = await waiting_approval_run(base_url)
    page = await (await browser.new_context(viewport=LAPTOP)).new_page()
    asked: list[str] = []
    async with mcp_session(base_url, "acme-operator") as acme:

        async def read_resource(uri: str) -> dict[str, Any]:
            asked.append(uri)
            read = await acme.read_resource(uri)
            return read.model_dump(mode="json", by_alias=True, exclude_none=True)

        status = await acme.call_tool("run.status", {"run_id": run["execution_id"]})
        template = (await acme.read_resource(RUN_VIEW_TEMPLATE_URI)).contents[0].text  # type: ignore[union-attr]
        await page.expose_function("mcpReadResource", read_resource)
        await page.set_content(MCP_APPS_HOST)
        await page.evaluate(
            "([template, result]) => window.startHost(template, result)",
            [template, status.model_dump(mode="json", by_alias=True, exclude_none=True)],
        )
        view = page.frame_locator("#view")
        await expect(view.locator('g.step[data-step="approval"]')).to_have_attribute(
            "data-status", "WaitingForInput"
        )
        await expect(view.locator("h1")).to_contain_text(run["shared_run_id"])
        received = await page.evaluate("window.received")
    assert received[:2] == ["ui/initialize", "ui/notifications/initialized"]
    assert {"resources/read", "ui/notifications/size-changed"} <= set(received)
    assert asked == [status.meta["ui"]["resourceUri"]] == [f"ui://mcp-runtime/runs/{run['shared_run_id']}"]
    await page.context.close()
    async with mcp_session(base_url, "acme-operator") as acme:
        await acme.call_tool("cancel", {"run_id": run["shared_run_id"]})
