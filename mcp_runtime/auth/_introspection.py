"""RFC 7662 introspection of opaque access tokens, with a short cache of positive answers.

Owns asking an issuer's introspection endpoint about a token (client_secret_basic with the
configured client, the secret read from the environment), checking the answer (`active`, `iss`
when present, `aud` = this resource, `exp`), and keeping an active answer for at most its
issuer's `cache_s` and never past the token's `exp`, keyed by the token's sha256 (the token is
never kept). Inactive answers are not cached: a token becomes valid only through the issuer.
Must not map claims to a principal.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from mcp_runtime.auth._issuer_keys import IssuerKeys, IssuerUnavailableError
from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._settings import OAuthSettings

MAX_CACHED_ANSWERS = 10_000


class Introspector:
    def __init__(
        self,
        settings: OAuthSettings,
        issuers: Sequence[IssuerKeys],
        http: httpx.AsyncClient,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._issuers = [issuer for issuer in issuers if issuer.issuer.introspection is not None]
        self._http = http
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, IssuerKeys, dict[str, Any]]] = OrderedDict()
        self.requests = 0

    @property
    def enabled(self) -> bool:
        return bool(self._issuers)

    async def introspect(self, token: str) -> tuple[IssuerKeys, dict[str, Any]]:
        """(the issuer that vouches for the token, its answer), or TokenRefusedError. Issuers are
        asked in configuration order; the first active answer wins."""
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > self._clock():
            return cached[1], cached[2]
        self._cache.pop(key, None)
        failures: list[str] = []
        for issuer in self._issuers:
            try:
                answer = await self._ask(issuer, token)
            except IssuerUnavailableError as exc:
                failures.append(str(exc))
                continue
            if answer.get("active") is True:
                self._check(issuer, answer)
                self._remember(key, issuer, answer)
                return issuer, answer
        if failures and len(failures) == len(self._issuers):
            raise TokenRefusedError(
                RefusalReason.KEYS_UNAVAILABLE,
                f"the token could not be introspected ({'; '.join(failures)}); retry later",
            )
        raise TokenRefusedError(
            RefusalReason.INACTIVE,
            "the access token is not active (expired, revoked or unknown); get a new one",
        )

    async def _ask(self, issuer: IssuerKeys, token: str) -> dict[str, Any]:
        config = issuer.issuer.introspection
        assert config is not None
        endpoint = config.endpoint or (await issuer.metadata()).introspection_endpoint
        if not endpoint:
            raise IssuerUnavailableError(f"issuer {issuer.issuer.issuer} names no introspection_endpoint")
        self.requests += 1
        try:
            response = await self._http.post(
                endpoint,
                data={"token": token, "token_type_hint": "access_token"},
                auth=(config.client_id, config.client_secret()),
                headers={"accept": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise IssuerUnavailableError(f"{endpoint}: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise IssuerUnavailableError(f"{endpoint}: HTTP {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise IssuerUnavailableError(f"{endpoint}: not JSON") from None
        return answer if isinstance(answer, dict) else {}

    def _check(self, issuer: IssuerKeys, answer: dict[str, Any]) -> None:
        if "iss" in answer and answer["iss"] != issuer.issuer.issuer:
            raise TokenRefusedError(
                RefusalReason.INVALID_CLAIMS,
                f"the introspection answer of {issuer.issuer.issuer} names another issuer",
            )
        audiences = answer.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences or []
        if not set(audiences) & set(self._settings.audiences(issuer.issuer)):
            raise TokenRefusedError(
                RefusalReason.WRONG_AUDIENCE,
                f"the access token is not for this resource (its aud must include {self._settings.resource})",
            )
        exp = answer.get("exp")
        if isinstance(exp, int | float) and exp <= self._clock() - self._settings.clock_skew_s:
            raise TokenRefusedError(RefusalReason.EXPIRED, "the access token has expired; get a new one")

    def _remember(self, key: str, issuer: IssuerKeys, answer: dict[str, Any]) -> None:
        config = issuer.issuer.introspection
        assert config is not None
        until = self._clock() + config.cache_s
        exp = answer.get("exp")
        if isinstance(exp, int | float):
            until = min(until, float(exp))
        while len(self._cache) >= MAX_CACHED_ANSWERS:
            self._cache.popitem(last=False)
        self._cache[key] = (until, issuer, answer)
