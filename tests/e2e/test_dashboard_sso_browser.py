"""Dashboard single sign-on in a real browser: Playwright driving Debian's Chromium against a served
control plane that trusts the loopback authorization server (OIDC authorization code + PKCE).

The identity provider answers on `localhost`, the dashboard on `127.0.0.1`: two sites, so the
provider's redirect back is a cross-site navigation, as in production. The user signs in on the
provider's login page, sees only the runs of the tenant their token maps to, and signs out
(RP-initiated logout at the provider, back to the dashboard's login page).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, async_playwright, expect

from runtime_core.hot_state import EmbeddedRedis, find_free_port
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, LAPTOP
from tests.e2e.dashboard_support import dashboard_environment
from tests.e2e.mcp_support import BearerClient, served_http
from tests.oauth_server import OAuthServer
from tests.oauth_support import (
    DASHBOARD_CLIENT,
    INTROSPECTION_SECRET,
    INTROSPECTION_SECRET_ENV,
    identity_provider,
    oauth_settings,
    with_browser_client,
)

RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}


class Site:
    def __init__(self, base_url: str, idp: OAuthServer) -> None:
        self.base_url = base_url
        self.resource = f"{base_url}/mcp"
        self.idp = idp

    async def submit_as(self, user: str) -> str:
        token = self.idp.realms["acme"].mint(user, audience=self.resource)
        async with BearerClient(self.resource, token) as client:
            result = await client.call_tool("submit", RAG)
        assert not result.is_error and result.structured_content is not None, result.content
        return str(result.structured_content["shared_run_id"])


@pytest.fixture(scope="module")
def site(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    idp = identity_provider(host="localhost")
    data_dir = tmp_path_factory.mktemp("dashboard-sso")
    port = find_free_port()
    base_url = f"http://127.0.0.1:{port}"
    with_browser_client(idp.realms["acme"], f"{base_url}/ui/sso/callback")
    settings = oauth_settings(idp, f"{base_url}/mcp")
    settings["issuers"][0]["dashboard"] = {
        "client_id": DASHBOARD_CLIENT,
        "display_name": "Acme SSO",
        "scopes": ["openid", "profile", "mcp:read", "mcp:operate"],
    }
    (data_dir / "server.json").write_text(json.dumps({"principals": {}, "oauth": settings}), encoding="utf-8")
    env = {**dashboard_environment(redis_server.url), INTROSPECTION_SECRET_ENV: INTROSPECTION_SECRET}
    try:
        with served_http(data_dir / "server.json", data_dir, env, port=port):
            yield Site(base_url, idp)
    finally:
        idp.stop()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


async def test_a_user_signs_in_through_the_provider_sees_only_their_tenants_runs_and_signs_out(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    own_run, foreign_run = await site.submit_as("alice"), await site.submit_as("bob")
    context = await browser.new_context(viewport=LAPTOP, base_url=site.base_url)
    page = await context.new_page()

    await page.goto("/ui/runs")
    await page.get_by_role("link", name="Sign in with Acme SSO").click()
    await expect(page).to_have_title("Sign in to acme")  # the provider's own page, on another site
    assert page.url.startswith(f"{site.idp.base_url}/realms/acme/authorize?")
    await page.get_by_label("Username").fill("alice")
    await page.get_by_label("Password").fill("alice-password")
    await page.get_by_role("button", name="Sign in").click()

    await expect(page).to_have_url(f"{site.base_url}/ui/runs")
    await expect(page.locator(".who")).to_contain_text("alice")
    await expect(page.locator(".who")).to_contain_text("tenant-a")
    await expect(page.locator(f'tr[data-run="{own_run}"]')).to_be_visible()
    assert await page.locator(f'tr[data-run="{foreign_run}"]').count() == 0
    await page.screenshot(path=tmp_path / "signed-in.png", full_page=True)
    session = next(c for c in await context.cookies() if c["name"] == "mcprt_session")
    assert (session["httpOnly"], session["sameSite"], session["secure"], session["path"]) == (
        True,
        "Strict",
        False,  # plain http here; Secure is set when served over https
        "/ui",
    )
    assert all(cookie["name"] != "mcprt_sso" for cookie in await context.cookies())
    await page.goto(f"/ui/runs/{foreign_run}")
    await expect(page.get_by_role("heading", name="Not found")).to_be_visible()

    sign_outs = len(site.idp.realms["acme"].sign_outs)
    await page.goto("/ui/runs")
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(f"{site.base_url}/ui/login")
    [sign_out] = site.idp.realms["acme"].sign_outs[sign_outs:]
    assert sign_out == {
        "client_id": DASHBOARD_CLIENT,
        "post_logout_redirect_uri": f"{site.base_url}/ui/login",
    }
    await page.goto("/ui/runs")
    await expect(page).to_have_url(f"{site.base_url}/ui/login?next=%2Fui%2Fruns")
    await context.close()


def test_a_callback_that_this_browser_did_not_start_opens_no_session(site: Site) -> None:
    forged = {"state": secrets.token_urlsafe(32), "code": "stolen-code"}
    answer = httpx.get(f"{site.base_url}/ui/sso/callback", params=forged, timeout=10)
    assert answer.status_code == 400 and "[sign_in_expired]" in answer.text
    assert "mcprt_session" not in answer.headers.get("set-cookie", "")
    refused: dict[str, Any] = {"error": "access_denied", "state": forged["state"]}
    denied = httpx.get(f"{site.base_url}/ui/sso/callback", params=refused, timeout=10)
    assert denied.status_code == 400 and "access_denied" in denied.text


def test_a_sign_in_started_in_one_browser_cannot_be_finished_in_another(site: Site) -> None:
    with httpx.Client(base_url=site.base_url, timeout=10) as victim, httpx.Client(timeout=10) as attacker:
        started = victim.get("/ui/sso/0/start", follow_redirects=False)
        assert started.status_code == 303
        authorize = started.headers["location"]
        login = attacker.post(authorize, data={"username": "bob", "password": "bob-password"})
        assert login.status_code == 302
        callback = login.headers["location"]
        answer = attacker.get(callback)  # the attacker's browser lacks the victim's sign-in cookie
    assert answer.status_code == 400 and "[sign_in_refused]" in answer.text
    assert "mcprt_session" not in answer.headers.get("set-cookie", "")
