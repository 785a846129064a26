"""The deployment examples under deploy/ (docs/deployment.md) describe processes that would start.

Each Kubernetes Deployment's and systemd unit's command line parses with the real `mcp-runtime`
argument parser; every runtime setting they put in the environment is one the code reads; the
control planes run no instances and start none; the probes are the ones the processes answer
(/readyz and /livez, or the gRPC health service); every container stops gracefully (preStop, then
SIGTERM within its grace); the configuration files load with the product's own loaders.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_runtime import hash_token, load_server_config
from mcp_runtime.cli import _parser
from runtime_core.control_plane import TenantsFile
from tests.e2e.mcp_support import REPOSITORY

DEPLOY = REPOSITORY / "deploy"
SOURCES = [*(REPOSITORY / "runtime_core").rglob("*.py"), *(REPOSITORY / "mcp_runtime").rglob("*.py")]
PLACEHOLDERS = {
    "$(POD_IP)": "10.0.0.5",
    "$(POD_NAME)": "pod-0",
    "${MCP_RUNTIME_LISTEN}": "10.0.0.21",
    "%H": "host-a",
}
CONTROL_PLANE_ENV = {"MCP_RUNTIME_LOCAL_INSTANCES": "0", "MCP_RUNTIME_SCALE_OUT": "false"}


def kubernetes_documents() -> list[dict[str, Any]]:
    documents = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        documents += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return documents


def deployments() -> list[dict[str, Any]]:
    return [doc for doc in kubernetes_documents() if doc["kind"] == "Deployment"]


def config_map(name: str) -> dict[str, str]:
    [found] = [
        d for d in kubernetes_documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name
    ]
    return found["data"]


def units() -> dict[str, dict[str, list[str]]]:
    """Each unit's [Service] settings; a key systemd allows to repeat keeps every value."""
    found = {}
    for path in sorted((DEPLOY / "systemd").glob("*.service")):
        section, settings = "", {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "Service" and "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                settings.setdefault(key, []).append(value)
        found[path.name] = settings
    return found


def parses(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """`mcp-runtime ARGV` parsed by the real parser (REDIS_URL in the environment, as deployed)."""
    monkeypatch.setenv("REDIS_URL", "redis+cluster://10.0.1.11:6379")
    resolved = [PLACEHOLDERS.get(arg, arg) for arg in argv]
    for placeholder, value in PLACEHOLDERS.items():
        resolved = [arg.replace(placeholder, value) for arg in resolved]
    return _parser().parse_args(resolved)


def read_by_the_code(name: str) -> bool:
    return any(f'"{name}"' in path.read_text(encoding="utf-8") for path in SOURCES)


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return only


@pytest.mark.parametrize("deployment", deployments(), ids=lambda d: d["metadata"]["name"])
def test_each_kubernetes_deployment_runs_a_command_the_cli_accepts(
    deployment: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = container(deployment)
    assert spec["command"] == ["mcp-runtime"]
    args = parses(spec["args"], monkeypatch)
    assert args.command in ("serve", "runtime-instance")
    if args.command == "runtime-instance":  # it publishes --bind-host: the pod's own address
        assert spec["args"][spec["args"].index("--bind-host") + 1] == "$(POD_IP)"
    else:
        assert args.host == "0.0.0.0" and args.transport == "http"
        assert CONTROL_PLANE_ENV.items() <= {e["name"]: e.get("value") for e in spec["env"]}.items()


@pytest.mark.parametrize("deployment", deployments(), ids=lambda d: d["metadata"]["name"])
def test_each_kubernetes_deployment_is_probed_where_its_process_answers_and_stops_gracefully(
    deployment: dict[str, Any],
) -> None:
    spec = container(deployment)
    ready, live = spec["readinessProbe"], spec["livenessProbe"]
    if "grpc" in ready:
        assert ready["grpc"].get("service", "") == "" and live["grpc"]["service"] == "liveness"
    else:
        assert (ready["httpGet"]["path"], live["httpGet"]["path"]) == ("/readyz", "/livez")
    pause = int(spec["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > pause


def test_every_setting_the_kubernetes_examples_give_is_one_the_code_reads() -> None:
    names = set(config_map("mcp-runtime-env"))
    for deployment in deployments():
        names |= {e["name"] for e in container(deployment)["env"] if "value" in e or "secretKeyRef" in str(e)}
        names |= {e["name"] for e in container(deployment)["env"] if e["name"].startswith("MCP_RUNTIME_")}
    [secret] = [d for d in kubernetes_documents() if d["kind"] == "Secret"]
    names |= set(secret["stringData"])
    unknown = sorted(name for name in names if not read_by_the_code(name))
    assert unknown == []


def test_the_example_configuration_files_load(tmp_path: Path) -> None:
    files = config_map("mcp-runtime-files")
    tenants = tmp_path / "tenants.json"
    tenants.write_text(files["tenants.json"], encoding="utf-8")
    assert TenantsFile.read(tenants).catalog.resolve("default").isolation_mode.value == "Shared"
    server = json.loads(files["server.json"])
    for principal in server["principals"].values():  # the placeholder must be replaced to start
        assert not re.fullmatch(r"[0-9a-f]{64}", principal["token_sha256"][0])
        principal["token_sha256"] = [hash_token("a token")]
    path = tmp_path / "server.json"
    path.write_text(json.dumps(server), encoding="utf-8")
    assert load_server_config(path).principals


@pytest.mark.parametrize("name", sorted(units()))
def test_each_systemd_unit_starts_a_command_the_cli_accepts_and_stops_on_sigterm(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = units()[name]
    for command in (*service["ExecStart"], *service["ExecStartPost"]):
        binary, *argv = shlex.split(command)
        assert binary.endswith("/bin/mcp-runtime")
        parses(argv, monkeypatch)
    assert service["KillSignal"] == ["SIGTERM"] and int(service["TimeoutStopSec"][0]) >= 30
    assert "/etc/mcp-runtime/mcp-runtime.env" in service["EnvironmentFile"]


def test_every_setting_the_systemd_examples_give_is_one_the_code_reads() -> None:
    env_file = (DEPLOY / "systemd" / "mcp-runtime.env").read_text(encoding="utf-8")
    names = {line.split("=", 1)[0] for line in env_file.splitlines() if line and not line.startswith("#")}
    names.discard("MCP_RUNTIME_LISTEN")  # the units' own variable: the address in their command lines
    for unit in units().values():
        names |= {setting.split("=", 1)[0] for setting in unit.get("Environment", [])}
    assert sorted(name for name in names if not read_by_the_code(name)) == []
    serve = units()["mcp-runtime-serve.service"]["Environment"]
    assert {f"{k}={v}" for k, v in CONTROL_PLANE_ENV.items()} <= set(serve)
