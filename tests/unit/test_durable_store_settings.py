"""Choosing the durable store from a URL and the environment (MCP_RUNTIME_DURABLE_URL, its password
variable, MONGODB_URI), and keeping a PostgreSQL password out of every printable form."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_core.errors import ConfigurationError
from runtime_core.storage import DurableStoreSettings

SECRET = "s3cr3t-Pa55word"


def test_a_postgresql_url_selects_postgresql_with_its_tls_options_passed_through() -> None:
    settings = DurableStoreSettings.from_url(
        "postgresql://app@db.internal:6432/runtime?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem"
    )
    assert settings.backend == "postgresql"
    conninfo = settings.postgresql_conninfo or ""
    for part in ("host=db.internal", "port=6432", "dbname=runtime", "user=app", "sslmode=verify-full"):
        assert part in conninfo
    assert "sslrootcert=/etc/ssl/db-ca.pem" in conninfo
    assert settings.postgresql_password is None  # libpq reads PGPASSWORD / .pgpass itself


def test_a_password_in_the_url_is_kept_apart_and_never_printed() -> None:
    settings = DurableStoreSettings.from_url(f"postgres://app:{SECRET}@db/runtime")
    assert settings.postgresql_password is not None
    assert settings.postgresql_password.get_secret_value() == SECRET
    for printed in (settings.postgresql_conninfo or "", settings.describe(), repr(settings), str(settings)):
        assert SECRET not in printed


@pytest.mark.parametrize("scheme", ["mongodb", "mongodb+srv"])
def test_a_mongodb_uri_with_a_password_is_kept_secret_in_every_printable_form(scheme: str) -> None:
    uri = f"{scheme}://app:{SECRET}@mongo.internal/?authSource=admin"
    for settings in (
        DurableStoreSettings.from_url(uri),
        DurableStoreSettings.from_env({"MONGODB_URI": uri}),
    ):
        assert settings is not None and settings.mongodb_uri is not None
        assert settings.mongodb_uri.get_secret_value() == uri
        dumped = (settings.model_dump_json(), str(settings.model_dump()), settings.describe())
        for printed in (*dumped, repr(settings), str(settings)):
            assert SECRET not in printed


def test_the_environment_password_wins_over_the_urls() -> None:
    env = {
        "MCP_RUNTIME_DURABLE_URL": "postgresql://app:from-url@db/runtime",
        "MCP_RUNTIME_DURABLE_PASSWORD": SECRET,
        "MCP_RUNTIME_DURABLE_POOL_SIZE": "25",
        "MCP_RUNTIME_DURABLE_TIMEOUT_MS": "1500",
    }
    settings = DurableStoreSettings.from_env(env)
    assert settings is not None and settings.postgresql_password is not None
    assert settings.postgresql_password.get_secret_value() == SECRET
    assert (settings.postgresql_pool_max_size, settings.postgresql_timeout_ms) == (25, 1500)


def test_the_durable_url_wins_over_mongodb_uri_and_nothing_set_means_the_embedded_default() -> None:
    both = {"MCP_RUNTIME_DURABLE_URL": "postgresql://db/runtime", "MONGODB_URI": "mongodb://m"}
    assert DurableStoreSettings.from_env(both).backend == "postgresql"  # type: ignore[union-attr]
    mongo = DurableStoreSettings.from_env({"MONGODB_URI": "mongodb://m", "MONGODB_DATABASE": "rt"})
    assert mongo is not None and (mongo.backend, mongo.mongodb_database) == ("mongodb", "rt")
    assert DurableStoreSettings.from_env({}) is None


def test_mongodb_and_sqlite_urls_select_their_backends() -> None:
    assert DurableStoreSettings.from_url("mongodb+srv://cluster.example/").backend == "mongodb"
    sqlite = DurableStoreSettings.from_url("sqlite:////var/lib/mcp-runtime/runtime.db")
    assert (sqlite.backend, sqlite.sqlite_path) == ("sqlite", Path("/var/lib/mcp-runtime/runtime.db"))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"mysql://app:{SECRET}@db/runtime", "names no known durable store"),
        (f"postgresql://app:{SECRET}@db/runtime?sslmod=require", "not a valid PostgreSQL URL"),
        ("sqlite://", "needs a file path"),
        ("", "names no known durable store"),
    ],
)
def test_a_url_naming_no_store_is_a_configuration_error_without_the_password(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        DurableStoreSettings.from_url(url)
    assert SECRET not in str(raised.value)


def test_a_tuning_variable_that_is_not_a_number_is_a_configuration_error() -> None:
    env = {"MCP_RUNTIME_DURABLE_URL": "postgresql://db/runtime", "MCP_RUNTIME_DURABLE_POOL_SIZE": "many"}
    with pytest.raises(ConfigurationError, match="MCP_RUNTIME_DURABLE_POOL_SIZE"):
        DurableStoreSettings.from_env(env)
