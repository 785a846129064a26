"""`mcp-runtime runtime-instance` reads the tenant settings file like `serve` does (issue 29.6): the
multi-process recipe exports MCP_RUNTIME_TENANTS_FILE, and the instances it hosts must carry the
tenant's settings from that file (its instance-id prefix, workers, run slots)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_core.hosting import TENANTS_FILE_ENV, parse_options

EXAMPLE_TENANTS = Path(__file__).resolve().parents[2] / "examples" / "config" / "tenants.json"
REQUIRED = ["--transport", "http", "--port", "8801", "--tenant", "tenant-a"]
REQUIRED += ["--redis-url", "redis://127.0.0.1:1/0", "--host-id", "host-a"]


def _tenant_a(path: Path) -> dict[str, object]:
    return json.loads(path.read_text(encoding="utf-8"))["tenants"]["tenant-a"]


def test_the_tenants_file_named_by_the_environment_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TENANTS_FILE_ENV, str(EXAMPLE_TENANTS))
    options = parse_options(REQUIRED)
    assert options.tenants_file == EXAMPLE_TENANTS
    tenant = options.tenant_settings()
    expected = _tenant_a(EXAMPLE_TENANTS)
    assert tenant.runtime_instance_id_prefix == expected["runtimeInstanceIdPrefix"]
    assert tenant.worker_count_per_instance == expected["workerCountPerInstance"]
    [first] = options.instance_settings("control-plane:host-a")
    assert f"rt_host-a:{expected['runtimeInstanceIdPrefix']}-" in first.runtime_instance_id


def test_the_tenants_file_option_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mine = tmp_path / "tenants.json"
    mine.write_text(json.dumps({"tenants": {"tenant-a": {"runtimeInstanceIdPrefix": "mine"}}}))
    monkeypatch.setenv(TENANTS_FILE_ENV, str(EXAMPLE_TENANTS))
    options = parse_options([*REQUIRED, "--tenants-file", str(mine)])
    assert options.tenant_settings().runtime_instance_id_prefix == "mine"


def test_without_file_or_variable_the_built_in_defaults_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TENANTS_FILE_ENV, raising=False)
    options = parse_options(REQUIRED)
    assert options.tenants_file is None
    assert options.tenant_settings().runtime_instance_id_prefix == "runtime-instance"


@pytest.mark.parametrize(("flags", "enabled"), [([], True), (["--no-assistance"], False)])
def test_execution_assistance_is_on_unless_the_process_turns_it_off(flags: list[str], enabled: bool) -> None:
    """`--no-assistance`: the process's instances neither ask for help nor lend idle workers."""
    options = parse_options([*REQUIRED, "--pool-size", "2", *flags])
    assert [s.assistance.enabled for s in options.instance_settings("control-plane:host-a")] == [enabled] * 2


def test_the_redis_url_comes_from_the_environment_when_the_option_is_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Redis URL carrying an ACL password stays off the command line (and `ps`)."""
    without = [arg for arg in REQUIRED if arg not in ("--redis-url", "redis://127.0.0.1:1/0")]
    monkeypatch.setenv("REDIS_URL", "redis://user:secret@127.0.0.1:1/0")
    assert parse_options(without).redis_url == "redis://user:secret@127.0.0.1:1/0"
    assert parse_options(REQUIRED).redis_url == "redis://127.0.0.1:1/0"  # the option wins
    monkeypatch.delenv("REDIS_URL")
    with pytest.raises(SystemExit):  # neither: a usage error naming --redis-url
        parse_options(without)


def test_the_redis_prefix_comes_from_the_environment_like_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """One environment file for every process: a prefix `serve` reads must reach its instances too."""
    monkeypatch.setenv("MCP_RUNTIME_REDIS_PREFIX", "prod:")
    assert parse_options(REQUIRED).redis_prefix == "prod:"
    assert parse_options([*REQUIRED, "--redis-prefix", "mine:"]).redis_prefix == "mine:"
    monkeypatch.delenv("MCP_RUNTIME_REDIS_PREFIX")
    assert parse_options(REQUIRED).redis_prefix == "mcprt:"
