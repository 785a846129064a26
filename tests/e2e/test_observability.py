"""Observability end to end, every part real: `mcp-runtime serve --transport http` and a gRPC
`mcp-runtime runtime-instance` process on the test redis-server, scraped by a real Prometheus
server and exporting traces to a loopback OTLP/HTTP receiver, driven by a real MCP client.

One stack per module: the control plane has no in-process instance and no background pump
(runs wait in the shared queue until `queue.drain`), so every step runs in the gRPC child and
the queue depth is whatever the test left pending. Tenant labels are enabled."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters

from mcp_runtime import hash_token
from runtime_core.hot_state import EmbeddedRedis, find_free_port
from tests.e2e.mcp_support import (
    REPOSITORY,
    BearerClient,
    child_process,
    clean_environment,
    mcp_runtime_command,
    serve_command,
    served_http,
    wait_for,
)
from tests.e2e.otlp_receiver import KIND_CLIENT, KIND_SERVER, OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.e2e.prometheus_support import (
    PrometheusServer,
    prometheus_server,
    promtool_check_metrics,
    require_prometheus,
)
from tests.helpers import wait_until

ACME_TOKEN = "acme-operator-" + secrets.token_hex(8)
GLOBEX_TOKEN = "globex-operator-" + secrets.token_hex(8)
INITECH_TOKEN = "initech-operator-" + secrets.token_hex(8)
RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}
RAG_STEPS = 4
RAG_STEP_KEYS = {"rag.retrieval", "rag.merge", "rag.compose"}
GRPC_SERVICE = "mcp_runtime.provider.v1.RuntimeProvider"
GLOBEX_DEPTH = 'mcprt_queue_depth{job="control-plane",tenant="globex"}'
ALERT_RULES = REPOSITORY / "examples" / "prometheus" / "alerts.yml"


@dataclass(frozen=True)
class Stack:
    base_url: str
    child_metrics_url: str
    prometheus: PrometheusServer
    receiver: OtlpReceiver


def _write_config(path: Path) -> Path:
    def principal(user: str, tenant: str, token: str) -> dict[str, Any]:
        digest = [hash_token(token)]
        return {"user_id": user, "tenant_id": tenant, "roles": ["operator"], "token_sha256": digest}

    principals = {
        "acme": principal("otto", "acme", ACME_TOKEN),
        "globex": principal("gus", "globex", GLOBEX_TOKEN),
        "initech": principal("ines", "initech", INITECH_TOKEN),
    }
    path.write_text(json.dumps({"principals": principals}), encoding="utf-8")
    return path


def _runtime_instance(redis_url: str, prefix: str, data_dir: Path, port: int, metrics_port: int) -> list[str]:
    return [
        mcp_runtime_command(),
        "runtime-instance",
        "--transport",
        "grpc",
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        "--tenant",
        "default",
        "--isolation",
        "Shared",
        "--pool-size",
        "1",
        "--workers",
        "4",
        "--redis-url",
        redis_url,
        "--redis-prefix",
        prefix,
        "--data-dir",
        str(data_dir),
        "--host-id",
        "obs-grpc",
        "--heartbeat-ms",
        "200",
    ]


def _scraped(url: str) -> bytes:
    reply = httpx.get(url, timeout=5)
    reply.raise_for_status()
    return reply.content


def _serves_instance_gauges(url: str) -> bool:
    try:
        return b'mcprt_instance_workers{runtime_instance_id="rt_obs-grpc' in _scraped(url)
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def stack(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require_prometheus()
    data_dir = tmp_path_factory.mktemp("observability")
    prefix = f"obs{secrets.token_hex(4)}:"
    with otlp_receiver() as (receiver, otlp_url):
        env = clean_environment(
            REDIS_URL=redis_server.url,
            MCP_RUNTIME_REDIS_PREFIX=prefix,
            MCP_RUNTIME_LOCAL_INSTANCES="0",
            MCP_RUNTIME_BACKGROUND_PUMP="false",
            MCP_RUNTIME_METRICS_TENANT_LABELS="true",
            OTEL_EXPORTER_OTLP_ENDPOINT=otlp_url,
            OTEL_BSP_SCHEDULE_DELAY="100",
        )
        with served_http(_write_config(data_dir / "server.json"), data_dir, env) as base_url:
            metrics_port = find_free_port()
            child = _runtime_instance(redis_server.url, prefix, data_dir, find_free_port(), metrics_port)
            child_metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            with child_process(child, env=env, log=data_dir / "runtime-instance.log") as process:
                wait_for(lambda: process.poll() is None and _serves_instance_gauges(child_metrics))
                # The child is found through the control plane's service discovery, as in production.
                targets = {"control-plane": base_url.removeprefix("http://")}
                discovered = {"runtime-instance": f"{base_url}/metrics/targets"}
                with prometheus_server(data_dir / "prometheus", targets, discovered) as prometheus:
                    yield Stack(base_url, child_metrics, prometheus, receiver)


async def _ok(client: Client, tool: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments, **options)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def _drain_until_done(client: Client, run_ids: list[str]) -> None:
    async def all_done() -> bool:
        await _ok(client, "queue.drain", {"max_count": 20})
        statuses = [await _ok(client, "run.status", {"run_id": run_id}) for run_id in run_ids]
        return all(status["done"] for status in statuses)

    await wait_until(all_done, timeout=60, interval=0.1)


async def test_prometheus_reports_queue_depth_per_tenant_and_step_durations_from_the_child(
    stack: Stack,
) -> None:
    async with BearerClient(f"{stack.base_url}/mcp", GLOBEX_TOKEN) as globex:
        queued = [(await _ok(globex, "submit", RAG))["shared_run_id"] for _ in range(3)]

        depth = stack.prometheus.wait_for(GLOBEX_DEPTH, lambda v: 3.0 in v.values())
        assert list(depth.values()) == [3.0]

        await _drain_until_done(globex, queued)

    # Nothing pending for globex any more: its series is gone (Prometheus marks it stale).
    stack.prometheus.wait_for(GLOBEX_DEPTH, lambda v: v == {})
    steps = stack.prometheus.wait_for(
        'sum by (step_key) (mcprt_step_duration_seconds_count{job="runtime-instance",outcome="completed"})',
        lambda v: sum(v.values()) >= 3 * RAG_STEPS,
    )
    assert {json.loads(labels)["step_key"] for labels in steps} == RAG_STEP_KEYS
    assert steps[json.dumps({"step_key": "rag.retrieval"})] >= 6  # two retrieval steps per run
    p99 = stack.prometheus.values(
        'histogram_quantile(0.99, sum by (le) (mcprt_step_duration_seconds_bucket{job="runtime-instance"}))'
    )
    assert len(p99) == 1 and all(0 <= value <= 300 for value in p99.values()), p99


async def test_prometheus_reports_capacity_of_the_child_and_tool_call_durations_by_tool(
    stack: Stack,
) -> None:
    async with BearerClient(f"{stack.base_url}/mcp", ACME_TOKEN) as acme:
        await _ok(acme, "pipelines.list", {})
        refused = await acme.call_tool("run.status", {"run_id": "srun_does_not_exist"})
    assert refused.is_error

    workers = stack.prometheus.wait_for(
        'mcprt_instance_workers{job="runtime-instance"}', lambda v: sum(v.values()) == 4
    )
    assert {json.loads(labels)["state"] for labels in workers} == {"active", "available"}
    can_accept = 'mcprt_instance_can_accept_run{job="runtime-instance"}'
    stack.prometheus.wait_for(can_accept, lambda v: 1.0 in v.values())
    calls = stack.prometheus.wait_for(
        'mcp_server_operation_duration_seconds_count{job="control-plane",mcp_method_name="tools/call"}',
        lambda v: any('"run.status"' in labels and '"tool_error"' in labels for labels in v),
    )
    assert any('"pipelines.list"' in labels and '"error_type"' not in labels for labels in calls)


def test_promtool_accepts_the_exposition_of_the_control_plane_and_of_the_child(stack: Stack) -> None:
    for url in (f"{stack.base_url}/metrics", stack.child_metrics_url):
        exposition = _scraped(url)
        checked = promtool_check_metrics(exposition)
        assert checked.returncode == 0 and not checked.stdout.strip(), (url, checked.stdout, checked.stderr)


def test_neither_exposition_has_created_series_and_every_metric_the_example_alerts_use_is_exposed(
    stack: Stack,
) -> None:
    expositions = [_scraped(f"{stack.base_url}/metrics"), _scraped(stack.child_metrics_url)]
    assert all(b"_created" not in exposition for exposition in expositions)
    exposed = {
        line.split()[2]
        for exposition in expositions
        for line in exposition.decode().splitlines()
        if line.startswith("# TYPE ")
    }
    used = set(re.findall(r"\b(mcprt_[a-z_]+)\b", ALERT_RULES.read_text(encoding="utf-8")))
    assert used and used <= exposed, used - exposed
    child = expositions[1].decode()
    for gauge in (
        "mcprt_executions_running",
        "mcprt_executions_waiting_for_input",
        "mcprt_executions_paused",
    ):
        assert f"# TYPE {gauge} gauge" in child


def test_promtool_accepts_the_example_alerting_rules_and_their_unit_tests() -> None:
    _, promtool = require_prometheus()
    for command in (["check", "rules", ALERT_RULES.name], ["test", "rules", "alerts-test.yml"]):
        checked = subprocess.run(
            [promtool, *command],
            cwd=ALERT_RULES.parent,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert checked.returncode == 0 and "SUCCESS" in checked.stdout, (
            command,
            checked.stdout,
            checked.stderr,
        )


async def test_prometheus_sees_the_queue_age_and_a_run_waiting_for_input_apart_from_running_ones(
    stack: Stack,
) -> None:
    age = 'mcprt_queue_oldest_age_seconds{job="control-plane",tenant="initech"}'
    waiting = 'sum(mcprt_executions_waiting_for_input{job="runtime-instance"})'
    async with BearerClient(f"{stack.base_url}/mcp", INITECH_TOKEN) as initech:
        submitted = await _ok(initech, "submit", {**RAG, "pipeline": "human-approval"})
        stack.prometheus.wait_for(age, lambda v: any(value > 0 for value in v.values()))
        await _ok(initech, "queue.drain", {"max_count": 5})

        async def parked() -> bool:
            status = await _ok(initech, "run.status", {"run_id": submitted["shared_run_id"]})
            return status.get("waiting_key") == "hire-approval"

        await wait_until(parked, timeout=60, interval=0.1)
        stack.prometheus.wait_for(waiting, lambda v: list(v.values()) == [1.0])
        stack.prometheus.wait_for(age, lambda v: v == {})  # nothing of initech's queued any more
        status = await _ok(initech, "run.status", {"run_id": submitted["shared_run_id"]})
        answer = {"execution_id": status["execution_id"], "waiting_key": "hire-approval"}
        await _ok(initech, "input.submit", {**answer, "payload": {"approved": True}})
        await _drain_until_done(initech, [submitted["shared_run_id"]])
    stack.prometheus.wait_for(waiting, lambda v: list(v.values()) == [0.0])


def test_service_discovery_lists_the_metrics_endpoint_of_each_runtime_instance_process(stack: Stack) -> None:
    groups = httpx.get(f"{stack.base_url}/metrics/targets", timeout=5).json()
    assert groups == [
        {
            "targets": [stack.child_metrics_url.removeprefix("http://").removesuffix("/metrics")],
            "labels": {"__scheme__": "http", "__metrics_path__": "/metrics", "mcprt_host": "obs-grpc"},
        }
    ]
    up = stack.prometheus.wait_for('up{job="runtime-instance"}', lambda v: 1.0 in v.values())
    assert [json.loads(labels)["mcprt_host"] for labels in up] == ["obs-grpc"]


def test_metrics_endpoint_needs_no_token_and_speaks_the_prometheus_text_format(stack: Stack) -> None:
    reply = httpx.get(f"{stack.base_url}/metrics", timeout=5)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE mcprt_queue_depth gauge" in reply.text
    assert "# TYPE mcp_server_operation_duration_seconds histogram" in reply.text


def _one_trace(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    return [span for span in receiver.spans() if span.trace_id == trace_id]


def _named(spans: list[ReceivedSpan], prefix: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


async def test_one_trace_runs_from_the_client_traceparent_through_mcp_dispatch_and_grpc_child_steps(
    stack: Stack,
) -> None:
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    traceparent = f"00-{trace_id}-{client_span}-01"
    async with BearerClient(f"{stack.base_url}/mcp", ACME_TOKEN) as acme:
        run_id = (await _ok(acme, "submit", RAG, meta={"traceparent": traceparent}))["shared_run_id"]
        await _drain_until_done(acme, [run_id])

    def complete() -> bool:  # each process exports on its own schedule
        names = [span.name for span in _one_trace(stack.receiver, trace_id)]
        expected = ("tools/call submit", "invoke_workflow", "dispatch ", f"{GRPC_SERVICE}/Dispatch")
        return all(any(n.startswith(e) for n in names) for e in expected) and (
            sum(n.startswith("step ") for n in names) >= RAG_STEPS
        )

    wait_for(complete, timeout_s=30)
    spans = _one_trace(stack.receiver, trace_id)
    by_id = {span.span_id: span for span in spans}

    [submit] = [s for s in spans if s.name == "tools/call submit"]
    assert (submit.service, submit.kind, submit.parent_span_id) == ("mcp-runtime", KIND_SERVER, client_span)
    assert submit.attributes["mcp.method.name"] == "tools/call"
    assert submit.attributes["gen_ai.tool.name"] == "submit"
    assert submit.attributes["gen_ai.operation.name"] == "execute_tool"
    assert submit.attributes["jsonrpc.request.id"]
    assert submit.attributes["mcp.protocol.version"] == "2026-07-28"  # sessionless: no mcp.session.id
    assert submit.attributes["network.transport"] == "tcp"
    assert "error.type" not in submit.attributes

    [run] = _named(spans, "invoke_workflow")
    assert run.name == "invoke_workflow rag-final-test" and run.parent_span_id == submit.span_id
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["mcprt.shared_run.id"] == run_id
    assert run.attributes["mcprt.execution.status"] == "Completed"
    assert run.service == "mcp-runtime-instance"  # recorded where the execution finalized

    [dispatch] = _named(spans, "dispatch ")
    assert (dispatch.service, dispatch.kind) == ("mcp-runtime", KIND_CLIENT)
    assert dispatch.parent_span_id == run.span_id
    assert dispatch.attributes["mcprt.provider.name"] == "grpc"

    [received] = [s for s in spans if s.name == f"{GRPC_SERVICE}/Dispatch"]
    assert (received.service, received.kind) == ("mcp-runtime-instance", KIND_SERVER)
    assert received.parent_span_id == dispatch.span_id  # continued from the gRPC metadata
    assert received.attributes["rpc.system"] == "grpc"

    steps = _named(spans, "step ")
    assert sorted(s.attributes["mcprt.step.name"] for s in steps) == ["candidate", "compose", "job", "merge"]
    assert {(s.service, s.parent_span_id) for s in steps} == {("mcp-runtime-instance", run.span_id)}
    assert all(by_id[s.parent_span_id] is run for s in steps)
    assert all(run.start_ns <= s.start_ns and s.end_ns <= run.end_ns for s in steps)


async def test_a_tool_error_is_an_error_span_with_its_code(stack: Stack) -> None:
    trace_id = secrets.token_hex(16)
    async with BearerClient(f"{stack.base_url}/mcp", ACME_TOKEN) as acme:
        meta = {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
        result = await acme.call_tool("run.status", {"run_id": "srun_unknown"}, meta=meta)
    assert result.is_error

    wait_for(lambda: bool(_one_trace(stack.receiver, trace_id)), timeout_s=30)
    [span] = _one_trace(stack.receiver, trace_id)
    assert span.name == "tools/call run.status"
    assert span.attributes["error.type"] == "tool_error"
    assert span.attributes["mcprt.error.code"] == "not_found"
    assert span.status_code == 2  # STATUS_CODE_ERROR


def _rpc(stack: Stack, session: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    headers = {
        "Authorization": f"Bearer {ACME_TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        **session,
    }
    return httpx.post(f"{stack.base_url}/mcp", json={"jsonrpc": "2.0", **body}, headers=headers, timeout=10)


def test_a_call_in_a_2025_era_session_carries_the_session_id(stack: Stack) -> None:
    trace_id = secrets.token_hex(16)
    initialize = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    opened = _rpc(stack, {}, {"id": 1, "method": "initialize", "params": initialize})
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    assert _rpc(stack, session, {"method": "notifications/initialized"}).status_code == 202
    call = {
        "name": "pipelines.list",
        "arguments": {},
        "_meta": {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"},
    }
    assert _rpc(stack, session, {"id": 2, "method": "tools/call", "params": call}).status_code == 200

    wait_for(lambda: bool(_one_trace(stack.receiver, trace_id)), timeout_s=30)
    [span] = _one_trace(stack.receiver, trace_id)
    assert span.name == "tools/call pipelines.list"
    assert span.attributes["mcp.session.id"] == session["mcp-session-id"]
    assert span.attributes["mcp.protocol.version"] == "2025-11-25"


async def test_a_stdio_server_serves_its_metrics_on_the_metrics_port(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    port = find_free_port()
    command = serve_command("stdio", tmp_path, "--metrics-port", str(port))
    prefix = f"obsio{secrets.token_hex(4)}:"
    env = clean_environment(REDIS_URL=redis_server.url, MCP_RUNTIME_REDIS_PREFIX=prefix)
    server = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(REPOSITORY))
    async with Client(server) as client:
        assert not (await client.call_tool("pipelines.list", {})).is_error
        exposition = _scraped(f"http://127.0.0.1:{port}/metrics").decode()
    listed = 'gen_ai_tool_name="pipelines.list",mcp_method_name="tools/call"'
    assert f'mcp_server_operation_duration_seconds_count{{error_type="",{listed}}} 1.0' in exposition
    assert 'mcprt_instance_workers{runtime_instance_id="rt_' in exposition  # its in-process instance
    assert "mcprt_queue_depth 0.0" in exposition


def test_an_http_server_serves_its_metrics_on_a_separate_address_instead_of_its_own_port(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """`--metrics-host` / `--metrics-port`: /metrics (tenant ids with tenant labels on) leaves the MCP
    port for an address of the operator's choosing, here 127.0.0.2 (loopback, another address)."""
    metrics_port = find_free_port()
    config = tmp_path / "server.json"
    config.write_text(json.dumps({"principals": {}}), encoding="utf-8")
    prefix = f"obsm{secrets.token_hex(4)}:"
    env = clean_environment(REDIS_URL=redis_server.url, MCP_RUNTIME_REDIS_PREFIX=prefix)
    options = ("--metrics-host", "127.0.0.2", "--metrics-port", str(metrics_port))
    with served_http(config, tmp_path, env, *options) as base_url:
        assert httpx.get(f"{base_url}/metrics", timeout=5).status_code == 404
        separate = httpx.get(f"http://127.0.0.2:{metrics_port}/metrics", timeout=5)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
    assert separate.status_code == 200 and "mcprt_queue_depth" in separate.text
