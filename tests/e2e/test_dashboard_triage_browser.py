"""Issue 29.1 in a real browser: triage across many runs, Playwright driving Debian's Chromium
against a served control plane (real subprocess, real redis-server), runs submitted through real
MCP sessions.

The runs list shows one status per run (a run parked on its gate reads Waiting for input), the
failing step and its error in the row, counts per status, relative times, and finds a run by any
of its ids. A failed run's page gives its times, input (secrets redacted: a credential-named
field, a key-shaped value and the value of the server's secret variable), result, each step's
bindings and output, the steps that will never run as Not run, a readable ledger, and runs it
again, linked. A waiting run says since when it waits. A run of 1,000 steps stays usable: its
graph summarised by layer, its steps and ledger a page at a time.

Screenshots go to the test's tmp dir; with MCP_RUNTIME_UPDATE_DOCS_IMAGES=1 they also refresh
docs/images/ (runs-list.png, failed-run.png, waiting-run.png, thousand-step-run.png).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from runtime_core.hot_state import EmbeddedRedis
from tests.e2e.conftest import LAPTOP
from tests.e2e.dashboard_support import TOKENS, call, mcp_session, served_dashboard, waiting_approval_run
from tests.e2e.mcp_support import REPOSITORY
from tests.helpers import wait_until

DOCS_IMAGES = REPOSITORY / "docs" / "images"
SERVER_SECRET = "srv-secret-" + secrets.token_hex(12)
PROVIDER_KEY = "sk-" + secrets.token_hex(16)
FAILING_INPUT = {"candidateId": "c-404", "jobId": "j-1", "apiKey": PROVIDER_KEY, "note": SERVER_SECRET}
BRANCHES = 998


def thousand_steps() -> dict[str, Any]:
    """start -> 998 branches (one of which fails for good) -> join: 1,000 steps."""
    steps: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.noop"}]
    for n in range(BRANCHES):
        failing = n == 500
        steps.append(
            {
                "name": f"branch-{n:03d}",
                "stepKey": "test.flaky" if failing else "test.noop",
                "dependsOn": ["start"],
                **({"config": {"failTimes": 9}} if failing else {}),
            }
        )
    steps.append(
        {"name": "join", "stepKey": "test.noop", "dependsOn": [f"branch-{n:03d}" for n in range(BRANCHES)]}
    )
    return {"name": "thousand", "steps": steps}


@pytest.fixture(scope="module")
def base_url(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("dashboard-triage")
    with served_dashboard(redis_server.url, data_dir, MCPRT_TEST_WEBHOOK_SECRET=SERVER_SECRET) as url:
        yield url


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dashboard-triage-screenshots")


async def _finished(base_url: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with mcp_session(base_url, "acme-operator") as acme:
        run_id = (await call(acme, "submit", {"mode": "DirectDispatch", **arguments}))["shared_run_id"]

        async def done() -> bool:
            return bool((await call(acme, "run.status", {"run_id": run_id}))["done"])

        await wait_until(done, timeout=120, interval=0.1)
        return await call(acme, "run.status", {"run_id": run_id, "include_steps": False})


@pytest.fixture(scope="module")
async def runs(base_url: str) -> dict[str, dict[str, Any]]:
    return {
        "completed": await _finished(base_url, {"pipeline": "flaky-retry"}),
        "failed": await _finished(base_url, {"pipeline": "rag-final-test", "input": FAILING_INPUT}),
        "waiting": await waiting_approval_run(base_url),
    }


async def _page(browser: Browser, base_url: str, path: str, height: int = LAPTOP["height"]) -> Page:
    context = await browser.new_context(
        viewport={"width": LAPTOP["width"], "height": height}, base_url=base_url
    )
    page = await context.new_page()
    await page.goto(path)
    await page.get_by_label("Access token").fill(TOKENS["acme-operator"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(re.compile(re.escape(path.split("?")[0])))
    return page


def _summary_link(page: Page, term: str) -> Any:
    return page.locator("#summary dl > div", has=page.locator("dt", has_text=term)).locator("dd a")


async def _screenshot(page: Page, artifacts: Path, name: str) -> None:
    """The page's top (the viewport: what the docs show), and up to 3,000 px of it for the test's record."""
    height = await page.evaluate("document.documentElement.scrollHeight")
    clip = {"x": 0, "y": 0, "width": LAPTOP["width"], "height": min(height, 3_000)}
    await page.screenshot(path=artifacts / name, full_page=True, clip=clip)
    if os.environ.get("MCP_RUNTIME_UPDATE_DOCS_IMAGES"):
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=DOCS_IMAGES / name)


async def test_the_runs_list_shows_one_status_the_failing_step_counts_and_finds_a_run_by_any_id(
    browser: Browser, base_url: str, runs: dict[str, dict[str, Any]], artifacts: Path
) -> None:
    page = await _page(browser, base_url, "/ui/runs")
    waiting, failed = runs["waiting"]["shared_run_id"], runs["failed"]["shared_run_id"]
    waiting_row, failed_row = (
        page.locator(f'tr[data-run="{waiting}"]'),
        page.locator(f'tr[data-run="{failed}"]'),
    )
    await expect(waiting_row.locator(".badge")).to_have_text("✎ Waiting for input")
    await expect(failed_row.locator(".badge")).to_have_text("✗ Failed")
    await expect(failed_row.locator("td.failure")).to_contain_text("candidate")
    await expect(failed_row.locator("td.failure")).to_contain_text("[not_found]")
    await expect(failed_row.locator("time.ago")).to_have_text(re.compile(r"^(just now|\d+ (s|min|h|d) ago)$"))
    exact = await failed_row.locator("time.ago").get_attribute("title")
    assert exact is not None and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", exact)
    await expect(page.locator('[data-count-status="WaitingForInput"] .count')).not_to_have_text("0")
    await expect(page.get_by_role("columnheader", name="Shared status")).to_have_count(0)  # one status
    await _screenshot(page, artifacts, "runs-list.png")

    await page.locator('[data-count-status="Failed"]').click()
    await expect(page.locator("tbody tr")).not_to_have_count(0)
    assert set(await page.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")) == {
        "Failed"
    }

    for any_id in (runs["failed"]["execution_id"], runs["failed"]["local_run_id"]):
        await page.goto("/ui/runs")
        await page.get_by_label("Find a run by any of its ids").fill(any_id)
        await page.get_by_role("button", name="Open run").click()
        await expect(page).to_have_url(f"{base_url}/ui/runs/{failed}")
    await page.goto("/ui/runs")
    await page.get_by_label("Find a run by any of its ids").fill("exec_" + "0" * 24)
    await page.get_by_role("button", name="Open run").click()
    await expect(page.locator(".notice")).to_contain_text("[not_found]")
    await page.context.close()


async def test_a_failed_run_shows_its_times_data_never_run_steps_and_secrets_redacted_and_runs_again(
    browser: Browser, base_url: str, runs: dict[str, dict[str, Any]], artifacts: Path
) -> None:
    failed = runs["failed"]["shared_run_id"]
    page = await _page(browser, base_url, f"/ui/runs/{failed}", height=1500)
    summary = page.locator("#summary")
    for label in ("Submitted", "Started", "Ended", "Duration"):
        await expect(summary.locator("dt", has_text=label)).to_be_visible()
    await expect(summary.locator(".failure dd")).to_have_text(
        "step candidate: [not_found] candidate.byId: no row with id 'c-404'"
    )
    for step in ("merge", "compose"):
        await expect(page.locator(f'#steps tr[data-step="{step}"] .badge')).to_have_text("\u2013 Not run")
    await expect(page.locator('#steps tr[data-step="candidate"]')).to_contain_text(
        "candidateId ← state.candidateId"
    )
    await expect(page.locator('#steps tr[data-step="job"] td.output summary')).to_contain_text('"id": "j-1"')
    data = page.locator("#data")
    await expect(data).to_contain_text('"candidateId": "c-404"')
    await expect(data).to_contain_text('"apiKey": "[redacted]"')
    await expect(data).to_contain_text('"note": "[redacted]"')
    html = await page.content()
    assert PROVIDER_KEY not in html and SERVER_SECRET not in html
    await expect(page.locator("#ledger .constants")).to_contain_text("Every entry that has them:")
    assert "{'" not in await page.locator("#ledger").inner_text()  # JSON, not Python reprs
    await _screenshot(page, artifacts, "failed-run.png")

    await page.get_by_role("button", name="Run again").click()
    await expect(page.locator(".notice")).to_contain_text(f"a new run of {failed}")
    again = page.url.rsplit("/", 1)[-1]
    assert again != failed and again.startswith("srun_")
    await expect(_summary_link(page, "Run again of")).to_have_text(failed)
    await page.goto(f"/ui/runs/{failed}")
    await expect(_summary_link(page, "Run again as")).to_have_text(again)
    await page.context.close()


async def test_a_waiting_run_says_since_when_it_waits(
    browser: Browser, base_url: str, runs: dict[str, dict[str, Any]], artifacts: Path
) -> None:
    waiting = runs["waiting"]["shared_run_id"]
    page = await _page(browser, base_url, f"/ui/runs/{waiting}", height=1300)
    await expect(page.locator("#run-status")).to_have_text("✎ Waiting for input")
    since = page.locator("#summary .waiting dd")
    await expect(since).to_contain_text(re.compile(r"since \d\d:\d\d UTC, "))
    await expect(since).to_contain_text("key hire-approval")
    await expect(page.get_by_role("heading", name="Input needed by step approval")).to_be_visible()
    await _screenshot(page, artifacts, "waiting-run.png")
    await page.context.close()


async def test_a_run_of_a_thousand_steps_is_summarised_by_layer_and_paged(
    browser: Browser, base_url: str, artifacts: Path
) -> None:
    big = await _finished(base_url, {"definition": thousand_steps()})
    page = await _page(browser, base_url, f"/ui/runs/{big['shared_run_id']}", height=1300)
    await expect(page.locator("#run-status")).to_have_text("✗ Failed")
    layers = page.locator("ol.layers li.layer")
    await expect(layers).to_have_count(3)
    await expect(layers.nth(1)).to_contain_text(f"{BRANCHES} steps")
    await expect(layers.nth(2).locator("summary .badge")).to_have_text("\u2013 Not run 1")
    await expect(page.locator("svg.dag")).to_have_count(0)
    await expect(page.locator("#steps tbody tr")).to_have_count(100)
    await expect(page.locator("#steps nav.pages")).to_contain_text("Page 1 of 10 · 1,000 steps")
    await expect(page.locator("#ledger nav.pages")).to_contain_text("Page 1 of")
    await _screenshot(page, artifacts, "thousand-step-run.png")

    await page.get_by_label("Show steps").select_option("Failed")
    await page.get_by_role("button", name="Show", exact=True).click()
    await expect(page.locator("#steps tbody tr")).to_have_count(1)
    await expect(page.locator('#steps tr[data-step="branch-500"]')).to_contain_text("[transient]")
    await page.context.close()
