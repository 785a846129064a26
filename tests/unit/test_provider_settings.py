"""The providers file: named LLM / retrieval entries; errors name the field, never a secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_core.bootstrap import RuntimeSettings
from runtime_core.errors import ConfigurationError
from runtime_core.steps import PromptConfig, StepProviders, StepProviderSettings, load_provider_settings
from runtime_core.steps.retrieval import (
    HttpOperation,
    MongoOperation,
    PostgresSettings,
    SqlOperation,
    bound_filter,
)

SECRET = "hunter2-do-not-print"
PG_OPERATIONS = {"candidate.byId": {"sql": "SELECT 1 WHERE %(candidateId)s IS NOT NULL", "result": "one"}}


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "providers.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return path


def test_a_providers_file_with_each_kind_loads(tmp_path: Path) -> None:
    document = {
        "llm": {
            "openai": {
                "kind": "openai",
                "base_url": "https://api.openai.com/v1",
                "model": "m",
                "api_key_env": "K",
            },
            "claude": {"kind": "anthropic", "model": "claude-x", "api_key_env": "A", "read_timeout_s": 30},
        },
        "retrieval": {
            "hr": {"kind": "postgres", "conninfo": "host=db dbname=hr user=app", "operations": PG_OPERATIONS},
            "search": {"kind": "http_json", "base_url": "http://s", "operations": {"q": {"path": "/q"}}},
            "docs": {"kind": "mongodb", "database": "d", "operations": {"q": {"collection": "c"}}},
        },
    }
    settings = load_provider_settings(write(tmp_path, document))
    assert settings.llm["claude"].base_url == "https://api.anthropic.com/v1"  # the API root, versioned
    assert settings.llm["openai"].connect_timeout_s == 5.0
    assert [entry.provider_type for entry in settings.retrieval.values()] == ["relational", "api", "document"]


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ("{not json", "invalid"),
        ({"llm": {"x": {"kind": "gemini", "model": "m"}}}, "llm.x"),
        ({"llm": {"x": {"kind": "openai", "base_url": "ftp://x", "model": "m"}}}, "base_url"),
        ({"llm": {"template": {"kind": "openai", "base_url": "http://x", "model": "m"}}}, "built-in"),
        (
            {"llm": {"x": {"kind": "openai", "base_url": "http://x", "model": "m", "api_key": SECRET}}},
            "api_key",
        ),
        ({"retrieval": {"pg": {"kind": "postgres", "operations": {}}}}, "operations"),
        ({"secrets": {}}, "secrets"),
    ],
)
def test_an_invalid_providers_file_is_a_configuration_error_naming_the_field(
    tmp_path: Path, document: Any, fragment: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(ConfigurationError) as refused:
        load_provider_settings(path)
    assert str(path) in refused.value.message and fragment in refused.value.message
    assert SECRET not in str(refused.value)


def test_a_missing_providers_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"no-such\.json"):
        load_provider_settings(tmp_path / "no-such.json")


def test_a_password_in_the_conninfo_is_refused_without_echoing_it(tmp_path: Path) -> None:
    entry = {"kind": "postgres", "conninfo": f"host=db password={SECRET}", "operations": PG_OPERATIONS}
    with pytest.raises(ConfigurationError) as refused:
        load_provider_settings(write(tmp_path, {"retrieval": {"pg": entry}}))
    assert "password_env" in refused.value.message and SECRET not in str(refused.value)


def test_sql_operations_bind_named_inputs_only() -> None:
    operation = SqlOperation(
        sql="SELECT * FROM t WHERE a = %(a)s AND b LIKE 'x%%' AND c = %(a)s OR d = %(b)s"
    )
    assert operation.params == ("a", "b")
    with pytest.raises(ValidationError, match="named placeholders"):
        SqlOperation(sql="SELECT * FROM t WHERE a = %s")


def test_http_operations_know_their_inputs_and_body_needs_post() -> None:
    operation = HttpOperation(path="/c/{candidateId}/jobs/{jobId}", query=("page",), method="GET")
    assert operation.params == ("candidateId", "jobId", "page")
    with pytest.raises(ValidationError, match="POST"):
        HttpOperation(path="/search", body=("q",))
    with pytest.raises(ValidationError, match="input name"):
        HttpOperation(path="/c/{candidate-id}")


def test_a_mongodb_filter_binds_param_leaves_only() -> None:
    operation = MongoOperation(
        collection="c",
        filter={
            "$and": [{"id": {"$param": "candidateId"}}, {"skills": {"$in": {"$param": "skills"}}}],
            "x": 1,
        },
    )
    assert operation.params == ("candidateId", "skills")
    bound = bound_filter(operation.filter, {"candidateId": "c-1", "skills": ["go"]})
    assert bound == {"$and": [{"id": "c-1"}, {"skills": {"$in": ["go"]}}], "x": 1}


def test_pool_sizes_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="min_size"):
        PostgresSettings(kind="postgres", min_size=5, max_size=2, operations=PG_OPERATIONS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"params": {"model": "other"}}, "params"),
        ({"params": {"output_config": {}}}, "params"),
        ({"responseSchema": {"type": 5}}, "responseSchema"),
        ({"schemaName": "has spaces"}, "schemaName"),
    ],
)
def test_prompt_configs_the_provider_cannot_send_are_invalid(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        PromptConfig.model_validate({"template": "t", **config})


def test_configured_retrieval_entries_register_under_their_type_and_may_replace_the_embedded_default(
    tmp_path: Path,
) -> None:
    entry = {"kind": "postgres", "conninfo": "host=db", "operations": PG_OPERATIONS}
    settings = StepProviderSettings.model_validate({"retrieval": {"default": entry, "hr": entry}})
    providers = StepProviders.build(settings, tmp_path)
    assert providers.retrieval.keys() == [
        ("relational", "default"),
        ("relational", "hr"),
        ("relational", "sqlite"),
    ]
    assert type(providers.retrieval.get("relational", "default")).__name__ == "PostgresRetrievalProvider"
    assert type(providers.retrieval.get("relational", "sqlite")).__name__ == "SqliteRelationalProvider"
    assert providers.retrieval.get("relational", "postgres") is None  # no alias of the embedded source


def test_runtime_settings_read_the_providers_file_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(
        tmp_path, {"llm": {"local": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"}}}
    )
    monkeypatch.setenv("MCP_RUNTIME_PROVIDERS_FILE", str(path))
    settings = RuntimeSettings.from_env()
    assert settings.providers_file == path
    assert list(settings.step_providers().llm) == ["local"]
    assert RuntimeSettings().step_providers() == StepProviderSettings()
