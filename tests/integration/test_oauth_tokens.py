"""Access tokens verified against a real loopback authorization server (JWKS and metadata over
HTTP): every bad token refused with its reason, keys rotated, JWKS refresh bounded, an issuer that
is down or slow, claims mapped to tenants and roles, introspection of opaque tokens."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mcp_runtime.auth import (
    AuthMethod,
    OAuthVerifier,
    Principal,
    RefusalReason,
    ScopeMap,
    TokenRefusedError,
)
from tests.helpers import wait_until
from tests.oauth_realm import Realm, SigningKey
from tests.oauth_server import OAuthServer
from tests.oauth_support import (
    INTROSPECTION_SECRET,
    INTROSPECTION_SECRET_ENV,
    bad_token,
    identity_provider,
    parsed_settings,
)

RESOURCE = "https://mcp.example.test/mcp"


@pytest.fixture(scope="module")
def idp() -> Iterator[OAuthServer]:
    server = identity_provider()
    yield server
    server.stop()


@pytest.fixture
def acme(idp: OAuthServer) -> Iterator[Realm]:
    realm = idp.realms["acme"]
    keys, signing = list(realm.keys), realm.signing_key
    yield realm
    realm.keys, realm.signing_key, realm.jwks_mode = keys, signing, "up"
    realm.slow_release.set()
    realm.slow_release.clear()


@pytest.fixture
async def verifier(idp: OAuthServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OAuthVerifier]:
    monkeypatch.setenv(INTROSPECTION_SECRET_ENV, INTROSPECTION_SECRET)
    async with fresh_verifier(idp, jwks_min_refresh_interval_s=3600) as verifier:
        yield verifier


@asynccontextmanager
async def fresh_verifier(idp: OAuthServer, **settings: Any) -> AsyncIterator[OAuthVerifier]:
    """A verifier with an empty key cache and these settings."""
    verifier = OAuthVerifier(parsed_settings(idp, RESOURCE, **settings), ScopeMap.load())
    try:
        yield verifier
    finally:
        await verifier.aclose()


async def refused(verifier: OAuthVerifier, token: str) -> TokenRefusedError:
    with pytest.raises(TokenRefusedError) as caught:
        await verifier.authenticate(token)
    assert token not in str(caught.value)
    return caught.value


async def principal(verifier: OAuthVerifier, token: str) -> Principal:
    return (await verifier.authenticate(token))[0]


# A valid token, and what it becomes


async def test_a_valid_rs256_token_is_its_users_tenant_roles_and_namespaces(
    verifier: OAuthVerifier, acme: Realm
) -> None:
    token = acme.mint("alice", audience=RESOURCE, scope="openid mcp:read run:submit")
    caller = await principal(verifier, token)
    assert (caller.user_id, caller.tenant_id, caller.tenant_group_id) == (
        "alice",
        "tenant-a",
        "tenant-a-group",
    )
    assert caller.roles == ("operator",)  # offline_access is not mapped: dropped
    assert caller.namespaces == ("tenant-a/hiring",)
    assert caller.scopes == ("openid", "mcp:read", "run:submit")
    assert caller.scope_permissions == ScopeMap.load().permissions(["mcp:read"]) | {"run:submit"}
    auth = caller.authentication
    assert auth is not None and auth.method is AuthMethod.OAUTH
    assert (auth.issuer, auth.subject, auth.token_id) == (
        acme.issuer,
        "alice",
        Realm.payload_of(token)["jti"],
    )
    snapshot = caller.snapshot("mcp:submit:1")
    assert (snapshot.auth_issuer, snapshot.auth_subject) == (acme.issuer, "alice")
    assert snapshot.auth_jti == auth.token_id and token not in snapshot.model_dump_json()


async def test_a_token_signed_with_the_issuers_ec_key_is_accepted(
    verifier: OAuthVerifier, acme: Realm
) -> None:
    token = acme.mint("bob", audience=RESOURCE, key=acme.key("ec-1"))
    assert (await principal(verifier, token)).tenant_id == "tenant-b"


async def test_a_static_tenant_issuer_gives_every_token_its_tenant(
    verifier: OAuthVerifier, idp: OAuthServer
) -> None:
    globex = idp.realms["globex"]
    token = globex.mint(
        "robot", audience=RESOURCE, claims={"client_id": "globex-robot", "roles": ["Runtime.Viewer"]}
    )
    caller = await principal(verifier, token)
    assert (caller.tenant_id, caller.user_id, caller.roles) == ("globex", "globex-robot", ("viewer",))


async def test_the_clock_skew_accepts_a_token_that_expired_a_moment_ago(
    verifier: OAuthVerifier, acme: Realm
) -> None:
    token = acme.mint("alice", audience=RESOURCE, now=time.time() - 330, lifetime_s=300)
    assert (await principal(verifier, token)).user_id == "alice"


# Bad tokens: each refused with its reason


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("wrong audience", RefusalReason.WRONG_AUDIENCE),
        ("for another resource", RefusalReason.WRONG_AUDIENCE),
        ("no audience", RefusalReason.INVALID_CLAIMS),
        ("expired", RefusalReason.EXPIRED),
        ("not yet valid", RefusalReason.NOT_YET_VALID),
        ("issued in the future", RefusalReason.NOT_YET_VALID),
        ("untrusted issuer", RefusalReason.UNKNOWN_ISSUER),
        ("unknown key", RefusalReason.UNKNOWN_KEY),
        ("another key under the issuer's kid", RefusalReason.BAD_SIGNATURE),
        ("alg none", RefusalReason.UNSUPPORTED_ALGORITHM),
        ("HS256 signed with the public key", RefusalReason.UNSUPPORTED_ALGORITHM),
        ("tampered payload", RefusalReason.BAD_SIGNATURE),
        ("an ID token (typ JWT)", RefusalReason.WRONG_TYPE),
        ("EC header on an RSA key", RefusalReason.UNKNOWN_KEY),
        ("no tenant", RefusalReason.NO_TENANT),
        ("not a JWT", RefusalReason.INACTIVE),
    ],
)
async def test_a_bad_token_is_refused_with_its_reason(
    verifier: OAuthVerifier, acme: Realm, case: str, reason: RefusalReason
) -> None:
    token = bad_token(acme, case, RESOURCE)
    assert (await refused(verifier, token)).reason is reason


async def test_the_refusal_of_a_tenantless_token_says_how_to_fix_it(
    verifier: OAuthVerifier, acme: Realm
) -> None:
    refusal = await refused(verifier, acme.mint("nora", audience=RESOURCE))
    assert "names no tenant" in str(refusal) and "'tenant'" in str(refusal)


# Keys: rotation, a flood of unknown kids, an issuer that is down or slow


async def test_a_rotated_key_is_accepted_after_one_refresh_and_a_removed_key_is_refused(
    idp: OAuthServer, acme: Realm
) -> None:
    async with fresh_verifier(idp, jwks_min_refresh_interval_s=0) as verifier:
        old = acme.mint("alice", audience=RESOURCE)
        assert (await principal(verifier, old)).user_id == "alice"
        new_key = acme.rotate()
        acme.remove_key("rsa-1")
        fetched = acme.jwks_requests
        assert (await principal(verifier, acme.mint("alice", audience=RESOURCE))).user_id == "alice"
        assert acme.jwks_requests == fetched + 1 and new_key.kid in str(acme.jwks())
        assert (await refused(verifier, old)).reason is RefusalReason.UNKNOWN_KEY


async def test_a_flood_of_invented_kids_costs_the_issuer_one_jwks_request(
    verifier: OAuthVerifier, acme: Realm
) -> None:
    await principal(verifier, acme.mint("alice", audience=RESOURCE))  # keys cached
    fetched = acme.jwks_requests
    forged = [
        acme.mint("alice", audience=RESOURCE, header={"kid": f"kid-{i}"}, key=SigningKey.generate("ec"))
        for i in range(30)
    ]
    refusals = await asyncio.gather(*(refused(verifier, token) for token in forged))
    assert {refusal.reason for refusal in refusals} == {RefusalReason.UNKNOWN_KEY}
    assert acme.jwks_requests <= fetched + 1


async def test_with_the_jwks_down_cached_keys_work_and_unknown_keys_are_refused_clearly(
    idp: OAuthServer, acme: Realm
) -> None:
    async with fresh_verifier(idp, jwks_min_refresh_interval_s=0) as verifier:
        await principal(verifier, acme.mint("alice", audience=RESOURCE))
        acme.jwks_mode = "down"
        assert (await principal(verifier, acme.mint("bob", audience=RESOURCE))).tenant_id == "tenant-b"
        refusal = await refused(verifier, acme.mint("alice", audience=RESOURCE, key=acme.rotate()))
        assert refusal.reason is RefusalReason.UNKNOWN_KEY and "HTTP 503" in str(refusal)


async def test_an_issuer_whose_jwks_never_answered_is_refused_as_unavailable(
    idp: OAuthServer, acme: Realm
) -> None:
    acme.jwks_mode = "down"
    async with fresh_verifier(idp) as verifier:
        refusal = await refused(verifier, acme.mint("alice", audience=RESOURCE))
        assert refusal.reason is RefusalReason.KEYS_UNAVAILABLE and "retry later" in str(refusal)


async def test_a_slow_jwks_holds_only_the_token_with_the_unknown_key(idp: OAuthServer, acme: Realm) -> None:
    async with fresh_verifier(idp, jwks_min_refresh_interval_s=0, http_timeout_s=30) as verifier:
        await principal(verifier, acme.mint("alice", audience=RESOURCE))
        acme.jwks_mode = "slow"
        fetched = acme.jwks_requests
        waiting = asyncio.create_task(
            principal(verifier, acme.mint("alice", audience=RESOURCE, key=acme.rotate()))
        )

        async def issuer_asked() -> bool:
            return acme.jwks_requests > fetched

        await wait_until(issuer_asked)  # the refresh is held by the issuer
        caller = await principal(verifier, acme.mint("bob", audience=RESOURCE, key=acme.key("ec-1")))
        assert caller.tenant_id == "tenant-b" and not waiting.done()
        acme.slow_release.set()
        assert (await waiting).user_id == "alice"  # released: the new key arrived


async def test_a_jwks_slower_than_the_timeout_refuses_the_unknown_key_with_a_clear_error(
    idp: OAuthServer, acme: Realm
) -> None:
    async with fresh_verifier(idp, jwks_min_refresh_interval_s=0, http_timeout_s=0.5) as verifier:
        await principal(verifier, acme.mint("alice", audience=RESOURCE))
        acme.jwks_mode = "slow"
        refusal = await refused(verifier, acme.mint("alice", audience=RESOURCE, key=acme.rotate()))
        assert refusal.reason is RefusalReason.UNKNOWN_KEY and "ReadTimeout" in str(refusal)


# Opaque tokens: RFC 7662 introspection with a short positive cache


async def test_an_opaque_token_is_introspected_once_then_served_from_the_cache(
    verifier: OAuthVerifier, acme: Realm
) -> None:
    token = acme.opaque(
        {
            "sub": "alice",
            "aud": RESOURCE,
            "exp": int(time.time()) + 300,
            "scope": "mcp:read",
            "tenant": "tenant-a",
        }
    )
    asked = acme.introspections
    first, second = await principal(verifier, token), await principal(verifier, token)
    assert first == second and first.tenant_id == "tenant-a" and first.scope_permissions is not None
    assert acme.introspections == asked + 1


async def test_an_inactive_or_foreign_opaque_token_is_refused_and_never_cached(
    verifier: OAuthVerifier, acme: Realm
) -> None:
    revoked = acme.opaque({"sub": "alice", "aud": RESOURCE, "tenant": "tenant-a"})
    acme.opaque_tokens[revoked]["active"] = False
    asked = acme.introspections
    assert (await refused(verifier, revoked)).reason is RefusalReason.INACTIVE
    assert (await refused(verifier, revoked)).reason is RefusalReason.INACTIVE
    assert acme.introspections == asked + 2
    foreign = acme.opaque({"sub": "alice", "aud": "https://other.example.test/mcp", "tenant": "tenant-a"})
    assert (await refused(verifier, foreign)).reason is RefusalReason.WRONG_AUDIENCE
