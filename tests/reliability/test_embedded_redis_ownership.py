"""Issue 13.5: the embedded default survives a crash of its owner, and a data directory has one
owner: a redis-server left running by a killed owner is adopted when it answers, or stopped by
its pid and replaced on the same AOF when it does not; never two servers on one directory. A
second live `serve` on a data directory in use is refused with a clear error naming the owner.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from runtime_core.errors import ConflictError
from runtime_core.hot_state import DataDirLock, EmbeddedRedis
from tests.e2e.mcp_support import clean_environment, processes_working_in, serve_command
from tests.reliability.restart_support import served


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[Path]:
    """The redis directory of the test; any server left in it is killed afterwards."""
    directory = tmp_path / "redis"
    yield directory
    for pid in processes_working_in(directory):
        os.kill(pid, signal.SIGKILL)


def test_a_server_left_by_a_killed_owner_is_adopted_with_its_data(cleanup: Path) -> None:
    first = EmbeddedRedis(cleanup, appendonly=True).start()
    redis.Redis.from_url(first.url).set("survives", "yes")
    # The owner dies without stopping its server: a new owner starts on the same directory.
    second = EmbeddedRedis(cleanup, appendonly=True).start()
    assert second.adopted and (second.pid, second.port) == (first.pid, first.port)
    assert processes_working_in(cleanup) == [first.pid]
    assert redis.Redis.from_url(second.url).get("survives") == b"yes"
    second.stop()
    assert processes_working_in(cleanup) == []


def test_a_server_left_by_a_killed_owner_that_does_not_answer_is_replaced_on_its_aof(cleanup: Path) -> None:
    first = EmbeddedRedis(cleanup, appendonly=True).start()
    redis.Redis.from_url(first.url).set("survives", "yes")
    assert first.pid is not None
    os.kill(first.pid, signal.SIGSTOP)  # hung: it no longer answers
    second = EmbeddedRedis(cleanup, appendonly=True).start()
    try:
        assert not second.adopted and second.pid != first.pid
        assert processes_working_in(cleanup) == [second.pid]
        assert redis.Redis.from_url(second.url).get("survives") == b"yes"
    finally:
        second.stop()


def test_a_recorded_pid_that_is_not_this_directorys_server_is_never_signalled(cleanup: Path) -> None:
    cleanup.mkdir(parents=True)
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        (cleanup / "embedded-redis.json").write_text(
            f'{{"pid": {bystander.pid}, "port": 1}}', encoding="utf-8"
        )
        server = EmbeddedRedis(cleanup, appendonly=False).start()
        assert not server.adopted and bystander.poll() is None
        server.stop()
    finally:
        bystander.kill()
        bystander.wait(timeout=10)


def test_a_data_directory_lock_names_its_live_owner(tmp_path: Path) -> None:
    held = DataDirLock(tmp_path).acquire()
    with pytest.raises(ConflictError, match=f"in use by another mcp-runtime process \\(pid {os.getpid()}\\)"):
        DataDirLock(tmp_path).acquire()
    held.release()
    DataDirLock(tmp_path).acquire().release()


def test_a_second_serve_on_a_data_directory_in_use_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with served(data_dir, clean_environment()) as plane:
        plane.start()
        assert plane.process is not None
        second = subprocess.run(
            serve_command("http", data_dir, "--port", "1"),
            env=clean_environment(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 2
        assert f"is in use by another mcp-runtime process (pid {plane.process.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        assert len(processes_working_in(data_dir / "redis")) == 1
        plane.end("term")
    assert processes_working_in(data_dir / "redis") == []
