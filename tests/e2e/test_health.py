"""Issue 13.8: health that means something, on real processes.

`mcp-runtime serve --transport http` and `mcp-runtime runtime-instance` child processes on a
redis-server of this module's own (so it can be stopped and started again on its port):
/livez answers while the process runs; /readyz (and its alias /healthz) is 503 naming the
failed check while Redis is stopped or the data directory cannot be written, and 200 again
once it is back; a gRPC runtime-instance process answers the standard gRPC health service.
A read-only data directory stops `serve` at start with a typed error naming it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from runtime_core.hot_state import EmbeddedRedis, find_free_port
from tests.e2e.mcp_support import (
    child_process,
    clean_environment,
    mcp_runtime_command,
    serve_command,
    wait_for,
    wait_for_health,
)

READINESS_CHECKS = {"redis", "durable_store", "data_dir", "background_loops"}
CONFIG = Path(__file__).resolve().parents[2] / "examples" / "config" / "principals.json"


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    # With its AOF: stopped and started again, it keeps the state (the discovery record among it).
    server = EmbeddedRedis(tmp_path_factory.mktemp("health-redis"), appendonly=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def environment(own_redis: EmbeddedRedis) -> dict[str, str]:
    return clean_environment(REDIS_URL=own_redis.url, MCP_RUNTIME_REDIS_PREFIX=f"hz{secrets.token_hex(3)}:")


@pytest.fixture(scope="module")
def served(
    environment: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """One control plane for the module: its base URL and data directory."""
    data_dir = tmp_path_factory.mktemp("health-serve")
    port = find_free_port()
    command = serve_command("http", data_dir, "--port", str(port), "--config", str(CONFIG))
    log = data_dir.parent / f"{data_dir.name}.log"
    with child_process(command, env=environment, log=log) as process:
        base_url = f"http://127.0.0.1:{port}"
        wait_for_health(process, base_url, log)
        yield base_url, data_dir


def probe(base_url: str, path: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{base_url}{path}", timeout=10)
    return response.status_code, response.json()


def failed_checks(body: dict[str, Any]) -> set[str]:
    return {name for name, check in body["checks"].items() if not check["ok"]}


def wait_for_readiness(base_url: str, *, ready: bool, path: str = "/readyz") -> dict[str, Any]:
    """Poll until /readyz is 200 (ready) or 503 (not ready); the body of that answer."""
    seen: dict[str, Any] = {}

    def reached() -> bool:
        status, body = probe(base_url, path)
        seen.update(body)
        return status == (200 if ready else 503)

    wait_for(reached, timeout_s=30)
    return seen


@contextmanager
def redis_stopped(server: EmbeddedRedis) -> Iterator[None]:
    server.stop()
    try:
        yield
    finally:
        server.start()


@contextmanager
def unwritable(directory: Path) -> Iterator[None]:
    """No new file can be made in `directory`. Root ignores permissions, not the immutable
    attribute. (Only the directory: files SQLite has mapped in memory must stay writable, or a
    write to them is a SIGBUS, not an error.)"""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(directory)], check=True)
        undo = ["chattr", "-i", str(directory)]
    else:
        directory.chmod(0o555)
        undo = ["chmod", "755", str(directory)]
    try:
        yield
    finally:
        subprocess.run(undo, check=True)


def test_readyz_names_every_check_and_livez_only_the_process(served: tuple[str, Path]) -> None:
    base_url, _ = served
    status, ready = probe(base_url, "/readyz")
    assert status == 200 and ready["status"] == "ready"
    assert set(ready["checks"]) == READINESS_CHECKS and not failed_checks(ready)
    assert "pump" in ready["checks"]["background_loops"]["detail"]
    alias_status, alias = probe(base_url, "/healthz")
    assert (alias_status, alias["status"], set(alias["checks"])) == (200, "ready", READINESS_CHECKS)
    live_status, live = probe(base_url, "/livez")
    assert (live_status, live["status"], set(live["checks"])) == (200, "alive", {"process"})


def test_readyz_is_not_ready_while_redis_is_stopped_and_ready_again_after(
    served: tuple[str, Path], own_redis: EmbeddedRedis
) -> None:
    base_url, _ = served
    with redis_stopped(own_redis):
        down = wait_for_readiness(base_url, ready=False)
        alias_status, alias = probe(base_url, "/healthz")
        live_status, _ = probe(base_url, "/livez")
    assert failed_checks(down) == {"redis"} and "[store_unavailable]" in down["checks"]["redis"]["detail"]
    assert (alias_status, failed_checks(alias), live_status) == (503, {"redis"}, 200)
    assert not failed_checks(wait_for_readiness(base_url, ready=True))


def test_readyz_is_not_ready_while_the_data_directory_is_unwritable_and_ready_again_after(
    served: tuple[str, Path],
) -> None:
    base_url, data_dir = served
    with unwritable(data_dir):
        down = wait_for_readiness(base_url, ready=False)
    assert failed_checks(down) == {"data_dir"}
    assert f"The data directory {data_dir} is not writable" in down["checks"]["data_dir"]["detail"]
    assert not failed_checks(wait_for_readiness(base_url, ready=True))


def test_serve_with_a_read_only_data_directory_exits_2_with_a_typed_error_naming_it(
    environment: dict[str, str], tmp_path: Path
) -> None:
    data_dir = tmp_path / "read-only"
    data_dir.mkdir()
    with unwritable(data_dir):
        done = subprocess.run(
            serve_command("http", data_dir, "--port", str(find_free_port()), "--config", str(CONFIG)),
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert f"error [data_dir_unwritable]: The data directory {data_dir} is not writable" in done.stderr
    assert "Traceback" not in done.stderr and "OperationalError" not in done.stderr


def _runtime_instance(transport: str, port: int, data_dir: Path, environment: dict[str, str]) -> list[str]:
    return [
        mcp_runtime_command(),
        "runtime-instance",
        "--transport",
        transport,
        "--port",
        str(port),
        "--tenant",
        "tenant-a",
        "--redis-url",
        environment["REDIS_URL"],
        "--redis-prefix",
        environment["MCP_RUNTIME_REDIS_PREFIX"],
        "--data-dir",
        str(data_dir),
        "--host-id",
        f"health-{transport}",
    ]


def test_an_http_runtime_instance_process_answers_livez_and_readyz_like_the_server(
    served: tuple[str, Path], environment: dict[str, str], own_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    port = find_free_port()
    command = _runtime_instance("http", port, tmp_path, environment)
    with child_process(command, env=environment, log=tmp_path / "instance.log") as process:
        base_url = f"http://127.0.0.1:{port}"
        wait_for_health(process, base_url, tmp_path / "instance.log")
        status, ready = probe(base_url, "/readyz")
        with redis_stopped(own_redis):
            down = wait_for_readiness(base_url, ready=False)
            assert probe(base_url, "/livez")[0] == 200
        again = wait_for_readiness(base_url, ready=True)
    assert status == 200 and set(ready["checks"]) == READINESS_CHECKS, json.dumps(ready)
    assert "runtime_instances" in ready["checks"]["background_loops"]["detail"]
    assert failed_checks(down) == {"redis"} and not failed_checks(again)


def test_a_grpc_runtime_instance_process_answers_the_grpc_health_service(
    served: tuple[str, Path], environment: dict[str, str], tmp_path: Path
) -> None:
    port = find_free_port()
    command = _runtime_instance("grpc", port, tmp_path, environment)
    with child_process(command, env=environment, log=tmp_path / "instance.log"):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)

            def check(service: str) -> int:
                return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status

            def serving() -> bool:
                try:
                    return check("") == health_pb2.HealthCheckResponse.SERVING
                except grpc.RpcError:
                    return False  # not listening yet

            wait_for(serving, timeout_s=30)
            assert check("liveness") == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as unknown:
                check("no-such-service")
    assert unknown.value.code() is grpc.StatusCode.NOT_FOUND
