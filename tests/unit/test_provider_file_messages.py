"""A providers file that is wrong says what to do (issue 29.6): the error names the entry's field as
written in the file (no `kind` tag in the path), a secret written into the file points at its
`*_env` field, and a variable an entry names that is not set is warned about at start, not found
only when a step runs. No value ever appears."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from runtime_core.errors import ConfigurationError
from runtime_core.steps import StepProviders, load_provider_settings, unset_environment_variables


def _file(tmp_path: Path, content: dict) -> Path:
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def _refusal(tmp_path: Path, content: dict) -> str:
    with pytest.raises(ConfigurationError) as refused:
        load_provider_settings(_file(tmp_path, content))
    return str(refused.value)


def test_a_bad_field_is_named_by_its_path_in_the_file(tmp_path: Path) -> None:
    message = _refusal(tmp_path, {"llm": {"gpt": {"kind": "openai", "base_url": 5, "model": "m"}}})
    assert "llm.gpt.base_url: Input should be a valid string" in message
    assert "gpt.openai" not in message


def test_an_api_key_in_the_file_points_at_api_key_env_and_is_never_echoed(tmp_path: Path) -> None:
    entry = {"kind": "openai", "base_url": "https://x.example/v1", "model": "m", "api_key": "sk-secret-1"}
    message = _refusal(tmp_path, {"llm": {"gpt": entry}})
    assert "llm.gpt.api_key: secrets never go in the providers file" in message
    assert "`api_key_env`" in message
    assert "Extra inputs are not permitted" not in message
    assert "sk-secret-1" not in message


def test_a_database_password_in_the_file_points_at_password_env(tmp_path: Path) -> None:
    entry = {"kind": "postgres", "conninfo": "host=db dbname=hr", "password": "hunter2", "operations": {}}
    message = _refusal(tmp_path, {"retrieval": {"hr": entry}})
    assert "retrieval.hr.password: secrets never go in the providers file" in message
    assert "`password_env`" in message
    assert "hunter2" not in message


def test_an_unset_variable_is_warned_about_when_the_providers_are_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("DOCS_TEST_UNSET_KEY", raising=False)
    monkeypatch.setenv("DOCS_TEST_SET_KEY", "value-never-logged")
    settings = load_provider_settings(
        _file(
            tmp_path,
            {
                "llm": {
                    "missing": {
                        "kind": "openai",
                        "base_url": "https://x.example/v1",
                        "model": "m",
                        "api_key_env": "DOCS_TEST_UNSET_KEY",
                    },
                    "present": {
                        "kind": "openai",
                        "base_url": "https://x.example/v1",
                        "model": "m",
                        "api_key_env": "DOCS_TEST_SET_KEY",
                    },
                    "local": {"kind": "openai", "base_url": "http://127.0.0.1:11434/v1", "model": "m"},
                }
            },
        )
    )
    assert unset_environment_variables(settings) == ["llm.missing: DOCS_TEST_UNSET_KEY (api_key_env)"]
    with caplog.at_level(logging.WARNING, logger="runtime_core.steps.providers"):
        StepProviders.build(settings, tmp_path)
    [warning] = [r for r in caplog.records if r.getMessage().startswith("providers.env_missing")]
    assert "llm.missing: DOCS_TEST_UNSET_KEY (api_key_env) is not set" in warning.getMessage()
    assert "value-never-logged" not in caplog.text


def test_an_mcp_server_entry_error_is_named_by_tenant_server_and_field(tmp_path: Path) -> None:
    entry = {"transport": "http", "url": "ftp://tools.example/mcp"}
    message = _refusal(tmp_path, {"mcp_servers": {"tenant-a": {"tickets": entry}}})
    assert "mcp_servers.tenant-a.tickets.url: Value error, url must be an absolute http(s) URL" in message
    assert "tickets.http" not in message


def test_an_oauth_client_secret_in_the_file_points_at_client_secret_env(tmp_path: Path) -> None:
    oauth = {"client_id": "runtime", "client_secret": "cs-secret-9"}
    entry = {"transport": "http", "url": "https://tools.example/mcp", "oauth": oauth}
    message = _refusal(tmp_path, {"mcp_servers": {"tenant-a": {"tickets": entry}}})
    assert (
        "mcp_servers.tenant-a.tickets.oauth.client_secret: secrets never go in the providers file" in message
    )
    assert "`client_secret_env`" in message and "cs-secret-9" not in message


def test_the_variables_an_mcp_server_entry_names_are_listed_when_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_DOCS_TEST_TOKEN", raising=False)
    monkeypatch.delenv("MCP_DOCS_TEST_DB", raising=False)
    servers = {
        "tickets": {
            "transport": "http",
            "url": "https://t.example/mcp",
            "bearer_token_env": "MCP_DOCS_TEST_TOKEN",
        },
        "local": {
            "transport": "stdio",
            "command": "tool-server",
            "env_from_env": {"DB_URL": "MCP_DOCS_TEST_DB"},
        },
    }
    settings = load_provider_settings(_file(tmp_path, {"mcp_servers": {"tenant-a": servers}}))
    assert unset_environment_variables(settings) == [
        "mcp_servers.tenant-a.local: MCP_DOCS_TEST_DB (env_from_env.DB_URL)",
        "mcp_servers.tenant-a.tickets: MCP_DOCS_TEST_TOKEN (bearer_token_env)",
    ]
