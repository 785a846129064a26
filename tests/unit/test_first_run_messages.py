"""What a new user meets on a first run (issue 29.6): `--version`, the options' help, and an
embedded redis-server that is installed but not on the PATH a desktop MCP host gives its servers."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import stat
from pathlib import Path

import pytest

from mcp_runtime.cli import main
from runtime_core.errors import StoreUnavailableError
from runtime_core.health import DataDirectoryError, check_data_dir_writable
from runtime_core.hot_state import REDIS_SERVER_ENV, find_redis_server
from runtime_core.hot_state import _embedded as embedded


def test_version_prints_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"mcp-runtime {importlib.metadata.version('mcp-runtime')}"


@pytest.mark.parametrize("command", ["run", "input"])
def test_providers_file_help_of_run_and_input_names_no_server_config(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "$MCP_RUNTIME_PROVIDERS_FILE, else the offline template and demo database" in help_text
    assert "config" not in help_text.split("--providers-file", 1)[1].split("--", 1)[0]


def test_a_redis_server_off_the_path_is_found_in_its_well_known_folder() -> None:
    installed = shutil.which("redis-server")
    assert installed is not None, "scripts/ensure-deps.sh installs redis-server"
    folder = str(Path(installed).parent)
    assert folder in embedded.WELL_KNOWN_DIRS
    assert find_redis_server({"PATH": "/nonexistent"}) == str(Path(folder) / "redis-server")


def test_the_named_redis_server_wins(tmp_path: Path) -> None:
    binary = tmp_path / "my-redis-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    assert find_redis_server({"PATH": os.environ["PATH"], REDIS_SERVER_ENV: str(binary)}) == str(binary)


def test_a_named_redis_server_that_is_no_executable_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError) as refused:
        find_redis_server({"PATH": "", REDIS_SERVER_ENV: str(tmp_path / "missing")})
    assert f"{REDIS_SERVER_ENV}={tmp_path / 'missing'} is not an executable file" in str(refused.value)
    assert "REDIS_URL" in refused.value.hint


def test_no_redis_server_anywhere_names_the_path_searched_and_every_way_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(embedded, "WELL_KNOWN_DIRS", (str(tmp_path),))
    with pytest.raises(StoreUnavailableError) as refused:
        find_redis_server({"PATH": "/opt/nothing"})
    message = str(refused.value)
    assert "redis-server was not found on PATH (/opt/nothing)" in message
    assert "not installed" not in message
    for way_out in ("apt-get install", REDIS_SERVER_ENV, "REDIS_URL", "`env`"):
        assert way_out in refused.value.hint


@pytest.mark.parametrize("below", [False, True])
def test_a_data_dir_that_is_a_file_is_named_as_a_file(tmp_path: Path, below: bool) -> None:
    a_file = tmp_path / "state"
    a_file.write_text("")
    with pytest.raises(DataDirectoryError) as refused:
        check_data_dir_writable(a_file / "sub" if below else a_file)
    assert f"{a_file} is a file, not a directory" in str(refused.value)
    assert "File exists" not in str(refused.value)
    assert "--data-dir" in refused.value.hint


def test_a_missing_pipeline_file_says_which_file_and_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(tmp_path / "nope.json"), "--data-dir", str(tmp_path / "data")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error [not_found]: Pipeline file '{tmp_path / 'nope.json'}' does not exist")
    assert "Errno" not in error
    assert "examples/pipelines/rag-final-test.json" in error
    assert not (tmp_path / "data").exists()  # refused before anything started


def test_a_bad_setting_names_its_field_and_never_echoes_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_RUNTIME_QUEUE_PARTITIONS", "not-a-number-s3cret")
    pipeline = Path(__file__).parents[2] / "examples" / "pipelines" / "flaky-retry.json"
    assert main(["run", str(pipeline), "--data-dir", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "error [invalid_arguments]: queue_partitions: Input should be a valid integer" in error
    assert "s3cret" not in error
