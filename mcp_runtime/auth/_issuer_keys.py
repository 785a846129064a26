"""One trusted issuer's metadata (RFC 8414 / OpenID discovery) and signing keys (its JWKS), cached.

Owns discovering the issuer's metadata (the exact `issuer` checked), fetching its JWKS, the key
cache by `kid`, and the refresh rules: an unknown `kid` refreshes the keys at most once per
`jwks_min_refresh_interval_s` (a flood of invented `kid`s costs the issuer one request per
interval), concurrent refreshes are one request, keys older than `jwks_max_age_s` are refreshed
in the background while the cached ones keep working, and a failed refresh keeps the cached
keys. Only a request presenting a `kid` the cache lacks ever waits for the issuer, and at most
`http_timeout_s`. Must not verify tokens.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from pydantic import BaseModel, ConfigDict, ValidationError

from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._settings import IssuerSettings, OAuthSettings

log = logging.getLogger("mcp_runtime.auth")

MAX_DOCUMENT_BYTES = 512 * 1024
_KEY_FAMILIES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
_PLAIN_KID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


class IssuerMetadata(BaseModel):
    """The fields of RFC 8414 / OpenID provider metadata this server uses."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    issuer: str
    jwks_uri: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    introspection_endpoint: str | None = None
    end_session_endpoint: str | None = None


class IssuerUnavailableError(Exception):
    """The issuer did not answer as expected; the message names the URL and what went wrong."""


async def fetch_json(http: httpx.AsyncClient, url: str) -> Any:
    try:
        response = await http.get(url, headers={"accept": "application/json"})
    except httpx.HTTPError as exc:
        raise IssuerUnavailableError(f"{url}: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise IssuerUnavailableError(f"{url}: HTTP {response.status_code}")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise IssuerUnavailableError(f"{url}: answer larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        return response.json()
    except ValueError:
        raise IssuerUnavailableError(f"{url}: not JSON") from None


def key_fits(jwk: dict[str, Any], algorithm: str) -> bool:
    """Whether a JWK may verify `algorithm`: its type (and curve) match the algorithm's family, its
    own `alg` (if any) is that algorithm, it is a signing key, and it is never a shared secret."""
    family = _KEY_FAMILIES.get(algorithm[:2])
    if family is None or jwk.get("kty") != family or jwk.get("use", "sig") != "sig":
        return False
    if jwk.get("alg") not in (None, algorithm):
        return False
    if family == "EC":
        return jwk.get("crv") == _EC_CURVES.get(algorithm)
    return family != "OKP" or jwk.get("crv") == "Ed25519"


def _shown_kid(kid: str | None) -> str:
    """A `kid` as an error may quote it: short and plain, else not at all (it is the caller's text)."""
    if kid is None:
        return "(no kid)"
    return f"'{kid}'" if _PLAIN_KID.fullmatch(kid) else "(kid not shown)"


class IssuerKeys:
    def __init__(
        self,
        issuer: IssuerSettings,
        settings: OAuthSettings,
        http: httpx.AsyncClient,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self._settings = settings
        self._http = http
        self._clock = clock
        self._metadata: IssuerMetadata | None = None
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._last_failure: str | None = None
        self._refreshing: asyncio.Task[None] | None = None
        self.fetches = 0  # JWKS requests made (observability and tests)

    async def metadata(self) -> IssuerMetadata:
        """The issuer's metadata, discovered once (again after a failure)."""
        if self._metadata is None:
            self._metadata = await self._discover()
        return self._metadata

    async def key_for(self, kid: str | None, algorithm: str) -> dict[str, Any]:
        """The JWK that verifies a token with this header, or a refusal saying why there is none."""
        if self._is_stale():
            self._refresh_in_background()
        found = self._find(kid, algorithm)
        if found is not None:
            return found
        shown = _shown_kid(kid)
        if self._refreshing is None and not self._may_refresh():
            raise TokenRefusedError(
                RefusalReason.UNKNOWN_KEY,
                f"the token's signing key {shown} is not among the keys of issuer {self.issuer.issuer} "
                f"(keys were refreshed less than {self._settings.jwks_min_refresh_interval_s:g} s ago); "
                "get a new token",
            )
        await asyncio.shield(self._start_refresh())
        found = self._find(kid, algorithm)
        if found is not None:
            return found
        if self._last_failure is not None and not self._keys:
            raise TokenRefusedError(
                RefusalReason.KEYS_UNAVAILABLE,
                f"the signing keys of issuer {self.issuer.issuer} could not be fetched "
                f"({self._last_failure}); retry later",
            )
        unavailable = f" (refresh failed: {self._last_failure})" if self._last_failure else ""
        raise TokenRefusedError(
            RefusalReason.UNKNOWN_KEY,
            f"the token's signing key {shown} is not among the keys of issuer {self.issuer.issuer}"
            f"{unavailable}; get a new token",
        )

    def holds(self, kid: str | None) -> bool:
        """Whether the key `kid` is among the keys fetched last (a removed key no longer is)."""
        return kid in self._keys

    def _find(self, kid: str | None, algorithm: str) -> dict[str, Any] | None:
        if kid is not None:
            jwk = self._keys.get(kid)
            return jwk if jwk is not None and key_fits(jwk, algorithm) else None
        fitting = [jwk for jwk in self._keys.values() if key_fits(jwk, algorithm)]
        return fitting[0] if len(fitting) == 1 else None  # no `kid`: only an unambiguous key

    def _is_stale(self) -> bool:
        return (
            self._fetched_at is not None and self._clock() - self._fetched_at > self._settings.jwks_max_age_s
        )

    def _may_refresh(self) -> bool:
        interval = self._settings.jwks_min_refresh_interval_s
        return self._attempted_at is None or self._clock() - self._attempted_at >= interval

    def _refresh_in_background(self) -> None:
        if self._refreshing is None and self._may_refresh():
            self._start_refresh()

    def _start_refresh(self) -> asyncio.Task[None]:
        if self._refreshing is None:
            self._attempted_at = self._clock()
            self._refreshing = asyncio.create_task(self._refresh(), name=f"jwks:{self.issuer.issuer}")
        return self._refreshing

    async def _refresh(self) -> None:
        try:
            self.fetches += 1
            document = await fetch_json(self._http, await self._jwks_uri())
            keys = document.get("keys") if isinstance(document, dict) else None
            if not isinstance(keys, list):
                raise IssuerUnavailableError("the JWKS has no 'keys' list")
            self._keys = {
                jwk.get("kid"): jwk for jwk in keys if isinstance(jwk, dict) and jwk.get("kty") != "oct"
            }
            self._fetched_at, self._last_failure = self._clock(), None
            log.info("auth.jwks_refreshed", extra={"issuer": self.issuer.issuer, "keys": len(self._keys)})
        except IssuerUnavailableError as exc:
            self._last_failure = str(exc)
            log.warning("auth.jwks_unavailable", extra={"issuer": self.issuer.issuer, "error": str(exc)})
        finally:
            self._refreshing = None

    async def _jwks_uri(self) -> str:
        if self.issuer.jwks_uri:
            return self.issuer.jwks_uri
        jwks_uri = (await self.metadata()).jwks_uri
        if not jwks_uri:
            raise IssuerUnavailableError(f"the metadata of {self.issuer.issuer} names no jwks_uri")
        return jwks_uri

    async def _discover(self) -> IssuerMetadata:
        urls = (
            [self.issuer.metadata_url]
            if self.issuer.metadata_url
            else build_oauth_authorization_server_metadata_discovery_urls(
                self.issuer.issuer, self.issuer.issuer
            )
        )
        failures = []
        for url in urls:
            try:
                metadata = IssuerMetadata.model_validate(await fetch_json(self._http, url))
            except (IssuerUnavailableError, ValidationError) as exc:
                failures.append(str(exc).splitlines()[0])
                continue
            if metadata.issuer != self.issuer.issuer:
                raise IssuerUnavailableError(
                    f"{url} names issuer {metadata.issuer!r}, not the configured {self.issuer.issuer!r}"
                )
            return metadata
        raise IssuerUnavailableError("no metadata found: " + "; ".join(failures))
