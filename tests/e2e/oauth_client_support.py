"""The MCP SDK client's own OAuth support, driven as a user would: a scripted user agent that signs
in on the authorization server's login page, in-memory token storage, and SDK clients that
authorize themselves (authorization code + PKCE after dynamic registration, or client credentials)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

# Never listened on: the scripted user agent reads the redirect instead of following it.
REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"


class MemoryTokenStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class ScriptedUserAgent:
    """Opens the authorization URL, signs in on the login page, reads the redirect's code."""

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self.password = password
        self.pages_seen: list[str] = []
        self._answer: dict[str, list[str]] = {}

    async def open(self, authorization_url: str) -> None:
        async with httpx.AsyncClient(timeout=10) as browser:
            page = await browser.get(authorization_url)
            assert page.status_code == 200, page.text
            self.pages_seen.append(page.text)
            credentials = {"username": self.username, "password": self.password}
            signed_in = await browser.post(authorization_url, data=credentials)
        assert signed_in.status_code == 302, signed_in.text
        location = signed_in.headers["location"]
        assert location.startswith(REDIRECT_URI)
        self._answer = parse_qs(urlsplit(location).query)

    async def callback(self) -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=self._answer["code"][0], state=self._answer["state"][0], iss=self._answer["iss"][0]
        )


@asynccontextmanager
async def _client(url: str, auth: httpx2.Auth) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(auth=auth, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def signed_in_client(url: str, user_agent: ScriptedUserAgent) -> AbstractAsyncContextManager[Client]:
    """An SDK client that discovers the authorization server from the 401, registers itself and
    signs in through `user_agent` (authorization code + PKCE)."""
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="oauth e2e test"),  # type: ignore[list-item]
        storage=MemoryTokenStorage(),
        redirect_handler=user_agent.open,
        callback_handler=user_agent.callback,
    )
    return _client(url, provider)


def machine_client(
    url: str, *, issuer: str, client_id: str, secret: str, scope: str
) -> AbstractAsyncContextManager[Client]:
    """An SDK client authorized by client credentials at `issuer` (a service, no user)."""
    provider = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=MemoryTokenStorage(),
        client_id=client_id,
        client_secret=secret,
        scope=scope,
        issuer=issuer,
    )
    return _client(url, provider)
