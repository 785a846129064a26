"""The identity rules that need no server: scopes file, claim paths, issuer settings, key fitting,
challenge headers, and the guard's refusals being audited."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from mcp_runtime import (
    DEFAULT_RBAC_MODEL,
    DEFAULT_RBAC_POLICY,
    Authorizer,
    InsufficientScopeError,
    ServerConfig,
)
from mcp_runtime._permissions import Permission, request_permission
from mcp_runtime.auth import (
    AccessAudit,
    Authentication,
    AuthMethod,
    IssuerSettings,
    Principal,
    RefusalReason,
    ScopeMap,
    TokenRefusedError,
    challenge,
    key_fits,
    principal_from_claims,
    resolve,
)

SCOPES = ScopeMap.load()


def test_every_permission_has_a_scope_named_like_it() -> None:
    for permission in Permission:
        assert SCOPES.scope_for(permission) == permission.value
        assert SCOPES.permissions([permission.value]) == {permission.value}


def test_the_read_bundle_covers_only_reads_and_unknown_scopes_cover_nothing() -> None:
    assert all(p.endswith(":read") for p in SCOPES.permissions(["mcp:read"]))
    assert SCOPES.permissions(["openid", "profile", "offline_access"]) == frozenset()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("sub", ["u1"]),
        ("realm_access.roles", ["a", "b"]),
        ("resource_access.mcp.roles", ["c"]),
        ("groups.name", ["g1", "g2"]),  # a list on the way is searched element by element
        ("groups.1.name", ["g2"]),  # a numeric key indexes
        ("https://example.com/tenant", ["t1"]),  # a top-level claim whose name holds dots
        (("ext", "https://example.com/ns"), ["n1"]),
        ("missing.path", []),
    ],
)
def test_claim_paths_resolve(path: Any, expected: list[str]) -> None:
    claims = {
        "sub": "u1",
        "realm_access": {"roles": ["a", "b"]},
        "resource_access": {"mcp": {"roles": ["c"]}},
        "groups": [{"name": "g1"}, {"name": "g2"}],
        "https://example.com/tenant": "t1",
        "ext": {"https://example.com/ns": "n1"},
    }
    assert resolve(claims, path) == expected


def _issuer(**settings: Any) -> IssuerSettings:
    return IssuerSettings.model_validate({"issuer": "https://idp.example.test", **settings})


def test_issuer_settings_refuse_none_and_hmac_algorithms() -> None:
    for algorithms in (["none"], ["HS256"], ["RS256", "HS512"], []):
        with pytest.raises(ValidationError, match="never none or HS"):
            _issuer(algorithms=algorithms, static_tenant_id="t")


def test_issuer_settings_need_exactly_one_tenant_source() -> None:
    with pytest.raises(ValidationError, match=r"exactly one of claims\.tenant_id"):
        _issuer()
    with pytest.raises(ValidationError, match=r"exactly one of claims\.tenant_id"):
        _issuer(static_tenant_id="t", claims={"tenant_id": "tenant"})


def test_a_token_naming_two_tenants_is_refused() -> None:
    issuer = _issuer(claims={"tenant_id": "tenants"})
    with pytest.raises(TokenRefusedError) as caught:
        principal_from_claims(issuer, {"sub": "u", "tenants": ["a", "b"]}, SCOPES)
    assert caught.value.reason is RefusalReason.INVALID_CLAIMS and "several values for tenant" in str(
        caught.value
    )


def test_without_a_scope_claim_an_issuer_may_let_roles_alone_decide() -> None:
    strict = principal_from_claims(_issuer(static_tenant_id="t"), {"sub": "u"}, SCOPES)
    lenient = principal_from_claims(_issuer(static_tenant_id="t", require_scopes=False), {"sub": "u"}, SCOPES)
    assert strict.scope_permissions == frozenset() and lenient.scope_permissions is None


def test_role_map_maps_issuer_roles_and_drops_the_others() -> None:
    issuer = _issuer(
        static_tenant_id="t",
        claims={"roles": "roles"},
        role_map={"Runtime.Operator": "operator", "Runtime.Admin": ["admin", "viewer"]},
        default_roles=["viewer"],
    )
    claims = {"sub": "u", "roles": ["Runtime.Admin", "Runtime.Operator", "Other"]}
    assert principal_from_claims(issuer, claims, SCOPES).roles == ("viewer", "admin", "operator")


@pytest.mark.parametrize(
    ("jwk", "algorithm", "fits"),
    [
        ({"kty": "RSA"}, "RS256", True),
        ({"kty": "RSA"}, "PS256", True),
        ({"kty": "RSA"}, "ES256", False),
        ({"kty": "EC", "crv": "P-256"}, "ES256", True),
        ({"kty": "EC", "crv": "P-384"}, "ES256", False),
        ({"kty": "RSA", "alg": "RS512"}, "RS256", False),
        ({"kty": "RSA", "use": "enc"}, "RS256", False),
        ({"kty": "oct"}, "HS256", False),
        ({"kty": "OKP", "crv": "Ed25519"}, "EdDSA", True),
    ],
)
def test_a_key_fits_only_its_algorithm_family(jwk: dict[str, Any], algorithm: str, fits: bool) -> None:
    assert key_fits(jwk, algorithm) is fits


def test_challenges_follow_rfc_6750() -> None:
    url = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
    assert challenge(url) == f'Bearer resource_metadata="{url}"'
    refused = challenge(url, error="invalid_token", description='say "hi" \\ bye')
    assert (
        refused == f'Bearer error="invalid_token", error_description="say hi  bye", resource_metadata="{url}"'
    )
    assert challenge(None) == "Bearer"


def test_request_permissions_cover_tools_tasks_and_resources() -> None:
    assert request_permission({"method": "tools/call", "params": {"name": "submit"}}) is Permission.RUN_SUBMIT
    assert request_permission({"method": "tasks/cancel"}) is Permission.RUN_CANCEL
    assert (
        request_permission({"method": "resources/read", "params": {"uri": "run://srun_1"}})
        is Permission.RUN_READ
    )
    assert request_permission({"method": "initialize"}) is None
    assert request_permission({"method": "tools/call", "params": {"name": "nope"}}) is None


def _oauth_operator(scopes: tuple[str, ...]) -> Principal:
    return Principal(
        name="alice",
        user_id="alice",
        tenant_id="acme",
        roles=("operator",),
        authentication=Authentication(
            method=AuthMethod.OAUTH, issuer="https://idp", subject="a", token_id="j1"
        ),
        scopes=scopes,
        scope_permissions=SCOPES.permissions(scopes),
    )


def test_scopes_narrow_roles_and_the_refusal_names_the_scope_to_request() -> None:
    authorizer = Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY, SCOPES)
    reader = _oauth_operator(("mcp:read",))
    assert authorizer.allows(reader, Permission.RUN_READ) and not authorizer.allows(
        reader, Permission.RUN_SUBMIT
    )
    with pytest.raises(InsufficientScopeError, match="request scope 'run:submit'"):
        authorizer.require(reader, Permission.RUN_SUBMIT)
    admin_scoped = _oauth_operator(("mcp:admin",))  # a scope never widens the operator role
    assert not authorizer.allows(admin_scoped, Permission.INSTANCE_READ)


def test_an_audited_refusal_counts_by_reason_and_logs_fields_never_a_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    audit = AccessAudit(registry)
    with caplog.at_level(logging.WARNING, logger="mcp_runtime.auth"):
        audit.refused(RefusalReason.EXPIRED, status=401, path="/mcp", detail="the access token has expired")
        audit.refused(RefusalReason.PERMISSION_DENIED, principal=_oauth_operator(()), tool="submit")
    assert registry.get_sample_value("mcp_runtime_access_refusals_total", {"reason": "expired"}) == 1
    denied = caplog.records[-1]
    assert denied.getMessage().startswith("auth.refused {")
    assert (denied.reason, denied.tool, denied.token_id, denied.tenant_id) == (  # type: ignore[attr-defined]
        "permission_denied",
        "submit",
        "j1",
        "acme",
    )


def test_the_example_configurations_of_docs_identity_load() -> None:
    page = (Path(__file__).parents[2] / "docs" / "identity.md").read_text(encoding="utf-8")
    examples = [block for block in re.findall(r"```json\n(.*?)```", page, re.S) if '"oauth"' in block]
    assert len(examples) == 2  # Keycloak-style and Entra-style
    configs = [ServerConfig.model_validate_json(block) for block in examples]
    keycloak, entra = (config.oauth for config in configs)
    assert keycloak is not None and keycloak.issuers[0].claims.tenant_id == "tenant"
    assert entra is not None
    assert [issuer.static_tenant_id for issuer in entra.issuers] == ["contoso", "fabrikam"]
