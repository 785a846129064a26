"""The dashboard's OpenID Connect sign-in against the loopback authorization server: the
authorization request (PKCE S256, state, nonce, RFC 8707 resource), the code exchange, the ID
token's checks (nonce, audience), the principal from the access token, and the logout URL."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from mcp_runtime.auth import (
    DashboardSso,
    OAuthSettings,
    OAuthVerifier,
    RefusalReason,
    ScopeMap,
    SignInError,
    TokenRefusedError,
)
from tests.oauth_server import OAuthServer
from tests.oauth_support import DASHBOARD_CLIENT, identity_provider, oauth_settings, with_browser_client

SITE = "https://mcp.example.test"
CALLBACK = f"{SITE}/ui/sso/callback"


@pytest.fixture(scope="module")
def idp() -> Iterator[OAuthServer]:
    server = identity_provider()
    with_browser_client(server.realms["acme"], CALLBACK)
    yield server
    server.stop()


@pytest.fixture
async def sso(idp: OAuthServer) -> AsyncIterator[DashboardSso]:
    settings = oauth_settings(idp, f"{SITE}/mcp")
    settings["issuers"][0]["dashboard"] = {"client_id": DASHBOARD_CLIENT, "scopes": ["openid", "mcp:read"]}
    oauth = OAuthVerifier(OAuthSettings.model_validate(settings), ScopeMap.load())
    yield DashboardSso(oauth, CALLBACK)
    await oauth.aclose()


async def sign_in_at_provider(authorization_url: str, user: str) -> dict[str, str]:
    """The user's browser at the provider: the login form, then the redirect's parameters."""
    async with httpx.AsyncClient(timeout=10) as browser:
        answer = await browser.post(
            authorization_url, data={"username": user, "password": f"{user}-password"}
        )
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(CALLBACK)
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


async def test_the_authorization_request_carries_pkce_state_nonce_and_the_resource(sso: DashboardSso) -> None:
    url = await sso.start("0", "browser-secret", "/ui/runs")
    query = {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert (query["client_id"], query["redirect_uri"], query["resource"]) == (
        DASHBOARD_CLIENT,
        CALLBACK,
        f"{SITE}/mcp",
    )
    assert query["scope"] == "openid mcp:read" and query["state"] != query["nonce"]


async def test_a_completed_sign_in_is_the_principal_of_the_access_token_and_names_the_logout(
    sso: DashboardSso, idp: OAuthServer
) -> None:
    answer = await sign_in_at_provider(await sso.start("0", "browser-secret", "/ui/runs/x"), "alice")
    signed_in, target = await sso.complete(answer["state"], answer["code"], "browser-secret")
    principal = signed_in.principal
    assert (principal.user_id, principal.tenant_id, principal.roles, target) == (
        "alice",
        "tenant-a",
        ("operator",),
        "/ui/runs/x",
    )
    assert principal.scope_permissions == ScopeMap.load().permissions(["mcp:read"])  # scopes narrow here too
    logout = signed_in.sign_out_url or ""
    assert (
        logout.startswith(idp.realms["acme"].endpoint("logout")) and f"client_id={DASHBOARD_CLIENT}" in logout
    )
    with pytest.raises(SignInError, match="expired or was already used"):
        await sso.complete(answer["state"], answer["code"], "browser-secret")  # one use only


async def test_an_id_token_with_another_nonce_is_refused(sso: DashboardSso, idp: OAuthServer) -> None:
    answer = await sign_in_at_provider(await sso.start("0", "browser-secret", "/ui/runs"), "alice")
    pending = idp.realms["acme"].codes[answer["code"]]
    pending.nonce = secrets.token_urlsafe(16)  # the provider's answer belongs to another sign-in
    with pytest.raises(TokenRefusedError) as caught:
        await sso.complete(answer["state"], answer["code"], "browser-secret")
    assert caught.value.reason is RefusalReason.INVALID_CLAIMS and "nonce" in str(caught.value)


async def test_a_code_the_provider_refuses_is_a_clear_sign_in_error(sso: DashboardSso) -> None:
    answer = await sign_in_at_provider(await sso.start("0", "browser-secret", "/ui/runs"), "alice")
    with pytest.raises(SignInError, match=r"refused the sign-in \(invalid_grant\)"):
        await sso.complete(answer["state"], "another-code", "browser-secret")
