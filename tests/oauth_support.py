"""The identity setup the OAuth tests share: a loopback authorization server with two realms.

`acme` is Keycloak-shaped: the tenant, tenant group, roles and namespaces are claims of the
user's token (roles under `realm_access.roles`, mapped to casbin roles). `globex` is
Entra-shaped: every token of the issuer is of one static tenant, roles in `roles`. Users sign
in on the realm's login page; confidential clients use client credentials; the resource server
introspects opaque tokens as the client `mcp-runtime`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from mcp_runtime.auth import OAuthSettings
from tests.oauth_realm import Client, Realm, SigningKey, User
from tests.oauth_server import OAuthServer

RESOURCE_PATH = "/mcp"
INTROSPECTION_SECRET_ENV = "MCP_RUNTIME_TEST_INTROSPECTION_SECRET"
INTROSPECTION_SECRET = "introspection-secret-for-tests"
DASHBOARD_CLIENT = "mcp-dashboard"
ALL_SCOPES = ("mcp:read", "mcp:operate", "mcp:admin")


def acme_claims(tenant: str, roles: list[str], **extra: Any) -> dict[str, Any]:
    return {"tenant": tenant, "tenant_group": f"{tenant}-group", "realm_access": {"roles": roles}, **extra}


def identity_provider(host: str = "127.0.0.1") -> OAuthServer:
    """The started server with its realms, users and clients (stop it when done); `host` is the name
    its URLs use (it listens on 127.0.0.1 either way)."""
    server = OAuthServer(host)
    acme = server.realm("acme")
    acme.users["alice"] = User(
        "alice-password",
        acme_claims("tenant-a", ["mcp-operator", "offline_access"], namespaces=["tenant-a/hiring"]),
        scopes=ALL_SCOPES,
    )
    acme.users["anna"] = User("anna-password", acme_claims("tenant-a", ["mcp-admin"]), scopes=ALL_SCOPES)
    acme.users["bob"] = User("bob-password", acme_claims("tenant-b", ["mcp-operator"]), scopes=ALL_SCOPES)
    acme.users["nora"] = User(
        "nora-password", {"realm_access": {"roles": ["mcp-operator"]}}, scopes=ALL_SCOPES
    )
    acme.clients["mcp-runtime"] = Client("mcp-runtime", secret=INTROSPECTION_SECRET)
    globex = server.realm("globex")
    globex.clients["globex-robot"] = Client(
        "globex-robot", secret="robot-secret", claims={"roles": ["Runtime.Operator"]}, scopes=ALL_SCOPES
    )
    return server.start()


def with_browser_client(realm: Realm, redirect_uri: str) -> None:
    realm.clients[DASHBOARD_CLIENT] = Client(DASHBOARD_CLIENT, redirect_uris=(redirect_uri,))


def oauth_settings(server: OAuthServer, resource: str, **overrides: Any) -> dict[str, Any]:
    """The `oauth` section of a server config trusting both realms (JSON-ready)."""
    acme, globex = server.realms["acme"], server.realms["globex"]
    settings: dict[str, Any] = {
        "resource": resource,
        "jwks_min_refresh_interval_s": 1,
        "http_timeout_s": 3,
        "issuers": [
            {
                "issuer": acme.issuer,
                "algorithms": ["RS256", "ES256"],
                "require_at_jwt": True,
                "claims": {
                    "user_id": "sub",
                    "tenant_id": "tenant",
                    "tenant_group_id": "tenant_group",
                    "roles": "realm_access.roles",
                    "namespaces": "namespaces",
                },
                "role_map": {"mcp-viewer": "viewer", "mcp-operator": "operator", "mcp-admin": "admin"},
                "introspection": {"client_id": "mcp-runtime", "client_secret_env": INTROSPECTION_SECRET_ENV},
            },
            {
                "issuer": globex.issuer,
                "algorithms": ["RS256"],
                "static_tenant_id": "globex",
                "claims": {"user_id": "client_id", "roles": "roles"},
                "role_map": {"Runtime.Operator": "operator", "Runtime.Viewer": "viewer"},
            },
        ],
    }
    settings.update(overrides)
    return settings


def parsed_settings(server: OAuthServer, resource: str, **overrides: Any) -> OAuthSettings:
    return OAuthSettings.model_validate(oauth_settings(server, resource, **overrides))


def bad_token(realm: Realm, case: str, resource: str, claims: dict[str, Any] | None = None) -> str:
    """A token of `realm` for `resource` that is bad in the way `case` says (`claims` are added)."""
    now = time.time()
    extra = claims or {}

    def mint(audience: Any = resource, **options: Any) -> str:
        return realm.mint("alice", audience=audience, **{"claims": extra, **options})

    def payload() -> dict[str, Any]:
        return Realm.payload_of(mint())

    match case:
        case "wrong audience":
            return mint(audience="account")
        case "for another resource":
            return mint(audience="https://other.example.test/mcp")
        case "no audience":
            return mint(omit=("aud",))
        case "expired":
            return mint(now=now - 3600, lifetime_s=300)
        case "not yet valid":
            return mint(claims={**extra, "nbf": int(now) + 600})
        case "issued in the future":
            return mint(claims={**extra, "iat": int(now) + 600, "nbf": int(now)})
        case "untrusted issuer":
            return mint(claims={**extra, "iss": "https://evil.example.test/realms/acme"})
        case "unknown key":
            return mint(key=SigningKey.generate("rsa", "rsa-unknown"))
        case "another key under the issuer's kid":
            return mint(key=SigningKey.generate("rsa", "rsa-1"))
        case "alg none":
            return Realm.unsigned(payload())
        case "HS256 signed with the public key":
            return Realm.hs256_with(realm.key("rsa-1").public_pem(), payload(), "rsa-1")
        case "tampered payload":
            token = mint()
            return Realm.with_payload(token, {**Realm.payload_of(token), "tenant": "tenant-b", "sub": "bob"})
        case "an ID token (typ JWT)":
            return mint(header={"typ": "JWT"})
        case "EC header on an RSA key":
            return mint(key=realm.key("ec-1"), header={"kid": "rsa-1"})
        case "no tenant":
            return realm.mint("nora", audience=resource)
        case "not a JWT":
            return secrets.token_urlsafe(32)
    raise AssertionError(f"no bad token case {case!r}")
