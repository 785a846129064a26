"""The MCP server as an OAuth 2.1 resource server, end to end: a real `mcp-runtime serve --transport
http` trusting two realms of a loopback authorization server (RS256 / ES256 keys, JWKS and RFC 8414
metadata over HTTP), reached by raw HTTP requests and by the MCP SDK client's own OAuth support."""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from mcp_runtime import hash_token
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state, find_free_port
from runtime_core.queueing import SharedRunStore
from runtime_core.storage import SqliteDurableStore
from tests.e2e.mcp_support import BearerClient, clean_environment, serve_command, served_http, wait_for
from tests.e2e.oauth_client_support import ScriptedUserAgent, machine_client, signed_in_client
from tests.helpers import wait_until
from tests.oauth_realm import Realm, SigningKey
from tests.oauth_server import OAuthServer
from tests.oauth_support import (
    INTROSPECTION_SECRET,
    INTROSPECTION_SECRET_ENV,
    bad_token,
    identity_provider,
    oauth_settings,
)

STATIC_TOKEN = "static-ops-" + secrets.token_hex(8)
METRICS_TOKEN = "metrics-" + secrets.token_hex(8)
RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}
MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-06-18",
}


class Served:
    def __init__(self, base_url: str, data_dir: Path, prefix: str, redis_url: str) -> None:
        self.base_url = base_url
        self.url = f"{base_url}/mcp"
        self.data_dir = data_dir
        self.prefix = prefix
        self.redis_url = redis_url
        self.metadata_url = f"{base_url}/.well-known/oauth-protected-resource/mcp"

    def log(self) -> str:
        return (self.data_dir / "server.log").read_text(errors="replace")

    def stored_bytes(self) -> bytes:
        return b"".join(path.read_bytes() for path in self.data_dir.glob("runtime.db*"))

    async def ledger(self, tenant_id: str) -> list[Any]:
        store = await SqliteDurableStore.open(self.data_dir / "runtime.db")
        try:
            return await store.list_ledger(tenant_id, limit=1000)
        finally:
            await store.close()


@pytest.fixture(scope="module")
def idp() -> Iterator[OAuthServer]:
    server = identity_provider()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(
    idp: OAuthServer, redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("oauth-rs")
    port = find_free_port()
    base_url = f"http://127.0.0.1:{port}"
    static = {
        "user_id": "ops",
        "tenant_id": "tenant-z",
        "roles": ["admin"],
        "token_sha256": [hash_token(STATIC_TOKEN)],
    }
    config = {
        "principals": {"ops-z": static},
        "oauth": oauth_settings(idp, f"{base_url}/mcp"),
        "metrics_token_sha256": [hash_token(METRICS_TOKEN)],
    }
    (data_dir / "server.json").write_text(json.dumps(config), encoding="utf-8")
    prefix = f"oauth{secrets.token_hex(4)}:"
    env = clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_REDIS_PREFIX=prefix,
        **{INTROSPECTION_SECRET_ENV: INTROSPECTION_SECRET},
    )
    with served_http(data_dir / "server.json", data_dir, env, port=port) as url:
        yield Served(url, data_dir, prefix, redis_server.url)


def post_tool(served: Served, token: str | None, tool: str, arguments: dict[str, Any]) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    headers = {**MCP_HEADERS, **({"authorization": f"Bearer {token}"} if token else {})}
    return httpx.post(served.url, json=body, headers=headers, timeout=10)


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def error_text(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return result.content[0].text  # type: ignore[union-attr]


# RFC 9728 metadata and the 401 challenge


def test_protected_resource_metadata_is_served_at_the_root_and_the_path_suffixed_form(
    served: Served, idp: OAuthServer
) -> None:
    root = httpx.get(f"{served.base_url}/.well-known/oauth-protected-resource", timeout=5)
    suffixed = httpx.get(served.metadata_url, timeout=5)
    assert root.status_code == suffixed.status_code == 200 and root.json() == suffixed.json()
    metadata = suffixed.json()
    assert metadata["resource"] == served.url
    assert metadata["authorization_servers"] == [idp.realms["acme"].issuer, idp.realms["globex"].issuer]
    assert {"run:submit", "mcp:read", "mcp:operate"} <= set(metadata["scopes_supported"])
    assert metadata["bearer_methods_supported"] == ["header"]


def test_a_request_without_a_token_is_401_naming_the_metadata_and_no_error(served: Served) -> None:
    answer = post_tool(served, None, "pipelines.list", {})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == f'Bearer resource_metadata="{served.metadata_url}"'


BAD_TOKEN_CASES = [
    "wrong audience",
    "for another resource",
    "expired",
    "not yet valid",
    "untrusted issuer",
    "unknown key",
    "alg none",
    "HS256 signed with the public key",
    "tampered payload",
    "not a JWT",
]


async def test_every_bad_token_is_401_invalid_token_runs_nothing_and_leaves_no_trace(
    served: Served, idp: OAuthServer
) -> None:
    realm = idp.realms["acme"]
    tokens = {case: bad_token(realm, case, served.url, {"tenant": "tenant-z"}) for case in BAD_TOKEN_CASES}
    for case, token in tokens.items():
        answer = post_tool(served, token, "submit", RAG)
        assert answer.status_code == 401, case
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith('Bearer error="invalid_token", error_description="'), (case, challenge)
        assert challenge.endswith(f'resource_metadata="{served.metadata_url}"'), case
        assert token not in challenge and token not in answer.text
    async with BearerClient(served.url, STATIC_TOKEN) as tenant_z:  # the bad tokens all claimed tenant-z
        assert (await ok(tenant_z, "runs.list", {}))["runs"] == []
    log, stored = served.log(), served.stored_bytes()
    for token in tokens.values():
        for fragment in {token, *[part for part in token.split(".") if len(part) > 16]}:
            assert fragment not in log and fragment.encode() not in stored
    assert not [entry for entry in await served.ledger("tenant-z") if entry.event == "access.refused"]


# A valid token, scopes, audit


async def test_a_valid_token_works_as_its_tenant_and_role_and_the_snapshot_names_issuer_subject_jti(
    served: Served, idp: OAuthServer
) -> None:
    acme = idp.realms["acme"]
    token = acme.mint("alice", audience=served.url, scope="mcp:read mcp:operate")
    jti = Realm.payload_of(token)["jti"]
    async with BearerClient(served.url, token) as alice:
        run_id = (await ok(alice, "submit", RAG))["shared_run_id"]
        status = await ok(alice, "run.status", {"run_id": run_id})
    assert status["tenant_id"] == "tenant-a"
    runs = SharedRunStore(connect_hot_state(served.redis_url, prefix=served.prefix))
    record = await runs.get(run_id)
    assert record is not None and record.snapshot is not None
    snapshot = record.snapshot
    assert (snapshot.tenant_id, snapshot.user_id, snapshot.roles) == ("tenant-a", "alice", ("operator",))
    assert (snapshot.auth_method, snapshot.auth_issuer, snapshot.auth_subject, snapshot.auth_jti) == (
        "oauth",
        acme.issuer,
        "alice",
        jti,
    )
    assert token not in snapshot.model_dump_json() and token not in served.log()
    await runs.hot_state.close()


def test_a_token_whose_roles_allow_submit_but_whose_scopes_do_not_is_403_insufficient_scope(
    served: Served, idp: OAuthServer
) -> None:
    token = idp.realms["acme"].mint(
        "alice", audience=served.url, claims={"tenant": "tenant-z"}, scope="mcp:read"
    )
    answer = post_tool(served, token, "submit", RAG)
    assert answer.status_code == 403
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope"')
    assert 'scope="run:submit"' in challenge and f'resource_metadata="{served.metadata_url}"' in challenge
    assert answer.json()["scope"] == "run:submit"


async def test_scopes_narrow_but_never_widen_roles(served: Served, idp: OAuthServer) -> None:
    acme = idp.realms["acme"]
    reader = acme.mint("alice", audience=served.url, scope="mcp:read")
    everything = acme.mint("alice", audience=served.url, scope="mcp:read mcp:operate mcp:admin")
    async with BearerClient(served.url, reader) as narrowed:
        assert "pipelines" in await ok(narrowed, "pipelines.list", {})
    async with BearerClient(served.url, everything) as widened:  # mcp:admin, but alice is an operator
        denied = await error_text(widened, "instances.list", {})
    assert denied.startswith("[permission_denied]") and "lack 'instance:read'" in denied


async def test_static_tokens_keep_working_beside_oauth(served: Served) -> None:
    async with BearerClient(served.url, STATIC_TOKEN) as ops:
        assert (await ok(ops, "instances.list", {}))["instances"] is not None


async def test_a_denied_call_is_logged_counted_and_in_the_callers_ledger_without_the_token(
    served: Served, idp: OAuthServer
) -> None:
    token = idp.realms["acme"].mint("bob", audience=served.url)
    jti = Realm.payload_of(token)["jti"]
    async with BearerClient(served.url, token) as bob:
        await error_text(bob, "instances.list", {})

    async def recorded() -> bool:
        return any(entry.attributes.get("token_id") == jti for entry in await served.ledger("tenant-b"))

    await wait_until(recorded, timeout=15)
    entry = next(e for e in await served.ledger("tenant-b") if e.attributes.get("token_id") == jti)
    assert entry.event == "access.refused"
    assert {k: entry.attributes[k] for k in ("principal", "tool", "reason", "issuer", "subject")} == {
        "principal": "bob",
        "tool": "instances.list",
        "reason": "permission_denied",
        "issuer": idp.realms["acme"].issuer,
        "subject": "bob",
    }
    assert token not in entry.model_dump_json() and token not in served.log()
    assert (
        f'"reason": "permission_denied", "subject": "bob", "tenant_id": "tenant-b", "token_id": "{jti}"'
        in (served.log())
    )
    async with httpx.AsyncClient(timeout=5) as http:
        metrics = await http.get(
            f"{served.base_url}/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"}
        )
    assert 'mcp_runtime_access_refusals_total{reason="permission_denied"}' in metrics.text


def test_metrics_need_the_metrics_token_when_one_is_configured(served: Served) -> None:
    assert httpx.get(f"{served.base_url}/metrics", timeout=5).status_code == 401
    wrong = httpx.get(f"{served.base_url}/metrics", headers={"authorization": "Bearer nope"}, timeout=5)
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == 'Bearer realm="metrics"'
    right = httpx.get(
        f"{served.base_url}/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"}, timeout=5
    )
    assert right.status_code == 200 and "mcp_runtime_access_refusals_total" in right.text


# The MCP SDK client's own OAuth support


async def test_the_sdk_client_signs_in_by_itself_and_another_tenants_client_cannot_see_its_runs(
    served: Served, idp: OAuthServer
) -> None:
    alice = ScriptedUserAgent("alice", "alice-password")
    async with signed_in_client(served.url, alice) as client_a:
        run_id = (await ok(client_a, "submit", RAG))["shared_run_id"]
        assert (await ok(client_a, "run.status", {"run_id": run_id}))["tenant_id"] == "tenant-a"
    assert "Sign in to acme" in alice.pages_seen[0]  # discovered from the 401, through the login page
    globex = idp.realms["globex"]
    machine = machine_client(
        served.url, issuer=globex.issuer, client_id="globex-robot", secret="robot-secret", scope="mcp:read"
    )
    async with machine as client_b:
        foreign = await error_text(client_b, "run.status", {"run_id": run_id})
        unknown_id = "srun_" + secrets.token_hex(8)
        unknown = await error_text(client_b, "run.status", {"run_id": unknown_id})
        assert (await ok(client_b, "runs.list", {}))["runs"] == []
    assert foreign.replace(run_id, "<id>") == unknown.replace(unknown_id, "<id>")
    assert foreign.startswith("[not_found]")


def test_a_rotated_key_is_accepted_after_a_refresh_and_the_removed_key_is_refused(
    served: Served, idp: OAuthServer
) -> None:
    acme = idp.realms["acme"]
    keys, signing = list(acme.keys), acme.signing_key
    old_token = acme.mint("alice", audience=served.url)
    assert post_tool(served, old_token, "pipelines.list", {}).status_code != 401
    try:
        acme.rotate()
        acme.remove_key("rsa-1")
        new_token = acme.mint("alice", audience=served.url)

        def accepted() -> bool:  # the server refreshes at most once a second (jwks_min_refresh_interval_s)
            return post_tool(served, new_token, "pipelines.list", {}).status_code != 401

        wait_for(accepted, timeout_s=15)
        refused = post_tool(served, old_token, "pipelines.list", {})
        assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
        assert "signing key 'rsa-1' is not among the keys" in refused.json()["error_description"]
    finally:
        acme.keys, acme.signing_key = keys, signing


def test_serve_refuses_to_start_when_a_named_client_secret_is_not_set(
    idp: OAuthServer, tmp_path: Path
) -> None:
    config = {"principals": {}, "oauth": oauth_settings(idp, "http://127.0.0.1:1/mcp")}
    (tmp_path / "server.json").write_text(json.dumps(config), encoding="utf-8")
    command = serve_command("http", tmp_path, "--config", str(tmp_path / "server.json"))
    ended = subprocess.run(command, env=clean_environment(), capture_output=True, text=True, timeout=60)
    assert ended.returncode == 2
    assert (
        f"error [invalid_configuration]: the oauth section names client secrets in {INTROSPECTION_SECRET_ENV}"
        in (ended.stderr)
    )
    assert "Traceback" not in ended.stderr


def test_with_the_jwks_slow_or_down_known_keys_keep_working_and_only_an_unknown_key_waits(
    served: Served, idp: OAuthServer
) -> None:
    acme = idp.realms["acme"]
    keys, signing = list(acme.keys), acme.signing_key
    stranger = acme.mint("alice", audience=served.url, key=SigningKey.generate("ec", "ec-stranger"))
    held: list[httpx.Response] = []
    try:
        acme.jwks_mode = "slow"
        fetched = acme.jwks_requests

        def unknown_key_held() -> bool:  # retried until the server's refresh is held by the issuer
            if acme.jwks_requests > fetched:
                return True
            if not held or held[-1].status_code == 401:
                holder = threading.Thread(
                    target=lambda: held.append(post_tool(served, stranger, "runs.list", {}))
                )
                holder.start()
                holder.join(timeout=0.2)
            return acme.jwks_requests > fetched

        wait_for(unknown_key_held, timeout_s=15)
        waiting = len(held)
        known = post_tool(
            served, acme.mint("bob", audience=served.url, key=acme.key("ec-1")), "pipelines.list", {}
        )
        assert known.status_code != 401 and len(held) == waiting  # answered while the refresh is held
        acme.slow_release.set()
        wait_for(lambda: len(held) > waiting, timeout_s=15)
        refused = held[-1]
        assert refused.status_code == 401 and "'ec-stranger' is not among the keys" in refused.text

        acme.jwks_mode = "down"
        assert (
            post_tool(served, acme.mint("bob", audience=served.url), "pipelines.list", {}).status_code != 401
        )

        def refused_as_unavailable() -> bool:
            answer = post_tool(served, stranger, "runs.list", {})
            return answer.status_code == 401 and "HTTP 503" in answer.json()["error_description"]

        wait_for(refused_as_unavailable, timeout_s=15)  # once the refresh interval (1 s) has passed
    finally:
        acme.keys, acme.signing_key, acme.jwks_mode = keys, signing, "up"
        acme.slow_release.clear()
