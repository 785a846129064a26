"""Authentication -> principal: hashed tokens, constant-time lookup, config loading, API keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from mcp_runtime import (
    ApiKeyHeaderMiddleware,
    BearerVerifier,
    ConfiguredTokenVerifier,
    PrincipalConfig,
    ServerConfig,
    default_server_config,
    hash_token,
    load_server_config,
)


def _config() -> ServerConfig:
    return ServerConfig(
        principals={
            "alice": PrincipalConfig(
                user_id="alice",
                tenant_id="tenant-a",
                tenant_group_id="group-1",
                roles=("operator",),
                namespaces=("ns-a",),
                current_namespace="ns-a",
                token_sha256=(hash_token("alice-token"), hash_token("alice-second-token")),
            ),
            "bob": PrincipalConfig(
                user_id="bob", tenant_id="tenant-b", token_sha256=(hash_token("bob-token"),)
            ),
        }
    )


def test_hash_token_is_the_sha256_hex_digest() -> None:
    assert hash_token("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


async def test_verifier_maps_each_configured_token_to_its_principal() -> None:
    verifier = BearerVerifier(ConfiguredTokenVerifier(_config()))
    assert (await verifier.verify_token("alice-token")).client_id == "alice"
    assert (await verifier.verify_token("alice-second-token")).client_id == "alice"
    assert (await verifier.verify_token("bob-token")).client_id == "bob"


async def test_verifier_rejects_unknown_token() -> None:
    assert await BearerVerifier(ConfiguredTokenVerifier(_config())).verify_token("guess") is None


async def test_verified_access_token_never_carries_the_plain_token() -> None:
    access = await BearerVerifier(ConfiguredTokenVerifier(_config())).verify_token("alice-token")
    assert access is not None
    assert "alice-token" not in access.model_dump_json()


async def test_principal_from_verified_token_carries_tenant_roles_and_namespaces() -> None:
    verifier = BearerVerifier(ConfiguredTokenVerifier(_config()))
    principal = (await verifier.authenticate("alice-token")).principal
    assert (principal.user_id, principal.tenant_id, principal.tenant_group_id) == (
        "alice",
        "tenant-a",
        "group-1",
    )
    assert principal.roles == ("operator",)
    assert principal.namespaces == ("ns-a",)
    assert principal.authentication is not None and principal.authentication.method == "static_token"
    assert principal.scope_permissions is None  # static tokens: the roles alone decide


def test_principal_snapshot_copies_identity_and_takes_the_context_key() -> None:
    snapshot = _config().principal("alice").snapshot("mcp:submit:7")
    assert snapshot.context_key == "mcp:submit:7"
    assert (snapshot.user_id, snapshot.tenant_id, snapshot.tenant_group_id) == (
        "alice",
        "tenant-a",
        "group-1",
    )
    assert (snapshot.roles, snapshot.namespaces, snapshot.current_namespace) == (
        ("operator",),
        ("ns-a",),
        "ns-a",
    )


def test_config_refuses_a_plain_text_token() -> None:
    with pytest.raises(ValidationError, match="hash-token"):
        PrincipalConfig(user_id="u", tenant_id="t", token_sha256=("my-secret-token",))


def test_config_refuses_unknown_stdio_principal() -> None:
    with pytest.raises(ValidationError, match="stdio_principal"):
        ServerConfig(principals={}, stdio_principal="ghost")


def test_default_config_runs_stdio_as_local_admin_of_tenant_default_without_tokens() -> None:
    config = default_server_config()
    principal = config.principal(config.stdio_principal or "")
    assert (principal.tenant_id, principal.roles) == ("default", ("admin",))
    assert all(not entry.token_sha256 for entry in config.principals.values())


def test_load_config_resolves_relative_paths_against_the_config_folder(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    path.write_text(
        json.dumps({"principals": {}, "rbac_policy": "rbac/policy.csv", "pipelines_dir": "pipes"}),
        encoding="utf-8",
    )
    config = load_server_config(path)
    assert config.rbac_policy == tmp_path / "rbac" / "policy.csv"
    assert config.pipelines_dir == tmp_path / "pipes"
    assert config.rbac_model.is_absolute()


def test_example_config_loads_and_its_demo_tokens_match() -> None:
    config = load_server_config(Path(__file__).parents[2] / "examples" / "config" / "principals.json")
    verifier = ConfiguredTokenVerifier(config)
    assert verifier.principal_name_for("demo-admin-token") == config.stdio_principal
    assert verifier.principal_name_for("tenant-a-operator-token") == "tenant-a-operator"
    assert verifier.principal_name_for("tenant-a-admin-token") == "tenant-a-admin"


async def test_api_key_header_becomes_a_bearer_authorization() -> None:
    seen: dict[str, list[tuple[bytes, bytes]]] = {}

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        seen["headers"] = scope["headers"]

    await ApiKeyHeaderMiddleware(app)({"type": "http", "headers": [(b"x-api-key", b"k1")]}, None, None)  # type: ignore[arg-type]
    assert (b"authorization", b"Bearer k1") in seen["headers"]


async def test_api_key_header_does_not_override_an_explicit_authorization() -> None:
    seen: dict[str, list[tuple[bytes, bytes]]] = {}

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        seen["headers"] = scope["headers"]

    headers = [(b"authorization", b"Bearer real"), (b"x-api-key", b"other")]
    await ApiKeyHeaderMiddleware(app)({"type": "http", "headers": headers}, None, None)  # type: ignore[arg-type]
    assert [value for name, value in seen["headers"] if name == b"authorization"] == [b"Bearer real"]
