"""One configured HTTP endpoint of a provider: base URL, timeouts, a pooled httpx client, secrets from env.

Owns `HttpEndpointSettings` (the fields every HTTP-backed provider entry shares), reading a
secret from the environment variable a config names, and sending one request whose failure
(no reply, or a non-2xx reply) is raised as a StepFailure with every secret redacted; or
opening a streamed reply (Server-Sent Events) the same way. Must not know any provider's
wire format, and must never log or store a secret.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._http_failures import failure_for_status, failure_for_transport

_POOL_TIMEOUT_S = 30.0


class HttpEndpointSettings(BaseModel):
    """`base_url` plus connect / read timeouts; `headers` are plain (never secret) extra headers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    connect_timeout_s: float = Field(default=5.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)
    headers: dict[str, str] = {}

    @field_validator("base_url")
    @classmethod
    def _absolute_http_url(cls, value: str) -> str:
        return absolute_http_url(value, "base_url").rstrip("/")


def absolute_http_url(value: str, field: str) -> str:
    """`value` when it is an absolute http(s) URL; ValueError naming `field` otherwise (a
    settings validator's check)."""
    url = httpx.URL(value)
    if url.scheme not in {"http", "https"} or not url.host:
        raise ValueError(f"{field} must be an absolute http(s) URL")
    return value


def secret_from_env(variable: str, what: str) -> str:
    """The value of environment variable `variable`; unset is a permanent failure naming the variable."""
    value = os.environ.get(variable, "")
    if not value:
        raise StepFailure(
            f"environment variable {variable} ({what}) is not set: export it where the runtime runs",
            code="permanent",
        )
    return value


class HttpEndpoint:
    """Requests to one base URL; the client is opened on first use (in the running loop) and pooled."""

    def __init__(
        self, settings: HttpEndpointSettings, credentials: str = "the credentials the request sent"
    ) -> None:
        self.settings = settings
        self.credentials = credentials  # what a 401 / 403 says was refused, e.g. the key's variable
        self._client: httpx.AsyncClient | None = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        secret_headers: Mapping[str, str] | None = None,
        not_found_code: str = "permanent",
        **arguments: Any,
    ) -> httpx.Response:
        """The 2xx reply to `method path`; anything else raises StepFailure (secrets redacted)."""
        url, what, all_headers, secrets = self._outgoing(method, path, headers, secret_headers)
        try:
            response = await self._open().request(method, url, headers=all_headers, **arguments)
        except httpx.HTTPError as error:
            raise failure_for_transport(what, error, secrets=secrets) from None
        failure = failure_for_status(
            what, response, secrets=secrets, not_found_code=not_found_code, credentials=self.credentials
        )
        if failure is not None:
            raise failure
        return response

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        secret_headers: Mapping[str, str] | None = None,
        **arguments: Any,
    ) -> AsyncIterator[httpx.Response]:
        """The open 2xx reply to `method path`, its body not read yet (a stream); a failure to
        connect or a non-2xx reply raises StepFailure like `request` (secrets redacted). A
        transport error while the caller reads the body is a StepFailure too."""
        url, what, all_headers, secrets = self._outgoing(method, path, headers, secret_headers)
        try:
            async with self._open().stream(method, url, headers=all_headers, **arguments) as response:
                if response.status_code >= 300:
                    await response.aread()
                    failure = failure_for_status(
                        what, response, secrets=secrets, credentials=self.credentials
                    )
                    if failure is not None:
                        raise failure
                yield response
        except httpx.HTTPError as error:
            raise failure_for_transport(what, error, secrets=secrets) from None

    def _outgoing(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str] | None,
        secret_headers: Mapping[str, str] | None,
    ) -> tuple[str, str, dict[str, str], tuple[str, ...]]:
        """A request's URL, how a failure names it, all its headers, and the secret values a
        failure must redact."""
        url = f"{self.settings.base_url}{path}"
        all_headers = {**self.settings.headers, **(headers or {}), **(secret_headers or {})}
        return url, f"{method} {url}", all_headers, _secret_values(secret_headers or {})

    def _open(self) -> httpx.AsyncClient:
        if self._client is None:
            s = self.settings
            timeout = httpx.Timeout(s.read_timeout_s, connect=s.connect_timeout_s, pool=_POOL_TIMEOUT_S)
            self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _secret_values(secret_headers: Mapping[str, str]) -> tuple[str, ...]:
    """Each secret header value and its credential alone (`Bearer <key>` -> `<key>`), for redaction."""
    values = [value for value in secret_headers.values() if value]
    return tuple(dict.fromkeys([*values, *(value.split()[-1] for value in values)]))


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The reply body as a JSON object; anything else is a `transient` failure (a proxy's error page)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise StepFailure(
            f"{what} answered {response.status_code} without a JSON object body", code="transient"
        )
    return body
