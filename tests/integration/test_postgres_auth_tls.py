"""The PostgreSQL durable store against a server that demands a password and offers TLS (a private
cluster this module starts: the shared test server trusts every loopback connection): the
password comes from MCP_RUNTIME_DURABLE_PASSWORD or libpq's PGPASSWORD and is in no message or
log; the URL's TLS options reach libpq (verify-full with the right CA connects over TLS, with
another CA it is refused as a typed error)."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import find_free_port
from runtime_core.storage import DurableStoreSettings, open_durable_store
from tests.postgres import PrivateServer, make_certificate_authority

PASSWORD = "Scram-only-" + "5e1f0a9c"
ROLE_PASSWORD = "Role-password-" + "77b0c3e2"


@pytest.fixture(scope="module")
def server(postgres_server: None) -> Iterator[PrivateServer]:
    root = Path(tempfile.mkdtemp(prefix="mcprt-pg-tls-"))  # not under pytest's root-only tmp
    private = PrivateServer(root, find_free_port(), PASSWORD)
    try:
        yield private.start()
    finally:
        private.stop()
        shutil.rmtree(root, ignore_errors=True)


def _url(server: PrivateServer, **params: str) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"postgresql://postgres@127.0.0.1:{server.port}/postgres" + (f"?{query}" if query else "")


def _settings(url: str, timeout_ms: int = 2000, **env: str) -> DurableStoreSettings:
    settings = DurableStoreSettings.from_env({"MCP_RUNTIME_DURABLE_URL": url, **env})
    assert settings is not None
    return settings.model_copy(update={"postgresql_timeout_ms": timeout_ms})


def _tls_of_the_stores_connections(server: PrivateServer) -> set[bool]:
    with psycopg.connect(server.conninfo(), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
            "WHERE a.application_name = 'mcp-runtime'"
        ).fetchall()
    return {bool(ssl) for (ssl,) in rows}


async def test_the_password_from_the_environment_authenticates(server: PrivateServer) -> None:
    settings = _settings(_url(server, sslmode="disable"), MCP_RUNTIME_DURABLE_PASSWORD=PASSWORD)
    store = await open_durable_store(settings)
    try:
        await store.probe_write()
        assert _tls_of_the_stores_connections(server) == {False}
    finally:
        await store.close()


async def test_libpq_reads_pgpassword_when_no_password_is_configured(
    server: PrivateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    store = await open_durable_store(_settings(_url(server, sslmode="disable")))
    await store.health()
    await store.close()


@pytest.mark.parametrize("password", [None, "Wrong-password-d41d8c"])
async def test_a_missing_or_wrong_password_is_a_typed_error_that_never_shows_it(
    server: PrivateServer, password: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"MCP_RUNTIME_DURABLE_PASSWORD": password} if password else {}
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailableError) as raised:
        await open_durable_store(_settings(_url(server, sslmode="disable"), 500, **env))
    message = str(raised.value)
    assert "password" in message  # libpq's reason: none supplied, or authentication failed
    for secret in (PASSWORD, password):
        if secret:
            assert secret not in message
            assert not [r for r in caplog.records if secret in r.getMessage()]


async def test_verify_full_with_the_servers_ca_connects_over_tls(server: PrivateServer) -> None:
    url = _url(server, sslmode="verify-full", sslrootcert=str(server.ca))
    store = await open_durable_store(_settings(url, MCP_RUNTIME_DURABLE_PASSWORD=PASSWORD))
    try:
        await store.probe_write()
        assert _tls_of_the_stores_connections(server) == {True}
    finally:
        await store.close()


async def test_verify_full_with_another_ca_is_refused_as_a_typed_error(
    server: PrivateServer, tmp_path: Path
) -> None:
    other_ca = make_certificate_authority(tmp_path, "other-ca")
    url = _url(server, sslmode="verify-full", sslrootcert=str(other_ca))
    with pytest.raises(StoreUnavailableError, match="certificate verify failed"):
        await open_durable_store(_settings(url, 500, MCP_RUNTIME_DURABLE_PASSWORD=PASSWORD))


async def test_a_role_that_owns_its_database_migrates_it_without_superuser_rights(
    server: PrivateServer,
) -> None:
    """The deployment recipe of docs/durable-stores.md: CREATE ROLE ... LOGIN; CREATE DATABASE ... OWNER."""
    with psycopg.connect(server.conninfo(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE mcp_runtime LOGIN PASSWORD '{ROLE_PASSWORD}'")
        admin.execute("CREATE DATABASE mcp_runtime OWNER mcp_runtime")
    url = f"postgresql://mcp_runtime@127.0.0.1:{server.port}/mcp_runtime?sslmode=require"
    store = await open_durable_store(_settings(url, MCP_RUNTIME_DURABLE_PASSWORD=ROLE_PASSWORD))
    try:
        await store.probe_write()
    finally:
        await store.close()
    with psycopg.connect(server.conninfo(dbname="mcp_runtime"), autocommit=True) as admin:
        owners = admin.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    assert owners == [("mcp_runtime",)]
