"""Issue 14.1: step plug-ins end to end, with the example plug-in package installed in the venv.

Its entry points register `example.slugify` (a @step function) and `example.word_stats` (a
step class) in every runtime process; `tests.integration.plugin_steps:whoami` is loaded by
reference. They run in-process (MCP submit -> drain -> run.status) and in an HTTP
runtime-instance child process started by the host manager (which passes the references
on); a plug-in step with a bad config is refused at submit with the step and field named,
and nothing is queued; `steps.list` and `step://` publish their config schemas. Real
redis-server, real MCP sessions, a real child process.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_runtime import Principal
from runtime_core.bootstrap import RuntimeServices
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import HostLaunch, HostTransport, IsolationMode
from runtime_core.pipeline import parse_pipeline
from runtime_core.plugins import StepPluginSettings
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import EXAMPLE_TENANTS
from tests.reliability.mcp_rig import failed, held_session, ok, runtime_settings, server_for, tool_backend

EXAMPLE_PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "step-plugin"
PIPELINE = json.loads((EXAMPLE_PLUGIN / "pipelines" / "slug-and-stats.json").read_text(encoding="utf-8"))
TEXT = {"title": "Hello, Plug-in World!", "body": "the cat and the other cat sat"}
WHOAMI = "tests.integration.plugin_steps:whoami"
OPERATOR = Principal(name="op", user_id="olga", tenant_id="default", roles=("operator",))
DEDICATED = ExecutionContextSnapshot(user_id="alice", tenant_id="tenant-a", context_key="plugins")


def _require_example_plugin() -> None:
    try:
        import mcp_runtime_example_steps  # noqa: F401
    except ImportError:
        pytest.fail("the example plug-in is not installed: pip install --no-deps -e examples/step-plugin")


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeServices]:
    _require_example_plugin()
    settings = runtime_settings(redis_server.url, tmp_path_factory.mktemp("plugins"))
    settings.control_plane = ControlPlaneSettings(
        background_pump=False, tenants_file=EXAMPLE_TENANTS, recovery_enabled=False
    )
    settings.plugins = StepPluginSettings(entry_points=True, references=(WHOAMI,))
    async with RuntimeServices(settings) as started:
        yield started


@pytest.fixture(scope="module")
async def client(services: RuntimeServices) -> AsyncIterator[Client]:
    async with held_session(server_for(tool_backend(services), OPERATOR)) as session:
        yield session


def _with_whoami(pipeline: dict[str, Any]) -> dict[str, Any]:
    whoami = {"name": "whoami", "stepKey": "plugin.whoami", "config": {"label": "here"}}
    return {**pipeline, "steps": [*pipeline["steps"], whoami]}


def _bad_step(config: dict[str, Any]) -> dict[str, Any]:
    slug = {**PIPELINE["steps"][0], "config": config}
    return {**PIPELINE, "steps": [slug, *PIPELINE["steps"][1:]]}


async def _run_to_end(client: Client, arguments: dict[str, Any]) -> dict[str, Any]:
    run_id = (await ok(client, "submit", arguments))["shared_run_id"]
    await ok(client, "queue.drain", {"max_count": 10})
    status: dict[str, Any] = {}

    async def done() -> bool:
        status.update(await ok(client, "run.status", {"run_id": run_id}))
        return bool(status["done"])

    await wait_until(done, timeout=30, interval=0.05)
    return status


def test_the_example_plugin_entry_points_and_the_reference_register_their_steps(
    services: RuntimeServices,
) -> None:
    registry = services.executors
    assert registry.source("example.slugify") == "entry point 'slugify' (mcp-runtime-example-steps 0.1.0)"
    assert registry.source("example.word_stats") == (
        "entry point 'word_stats' (mcp-runtime-example-steps 0.1.0)"
    )
    assert registry.source("plugin.whoami") == f"reference '{WHOAMI}'"
    assert registry.source("rag.merge") == "builtin"


async def test_plugin_steps_run_in_process_through_submit_drain_and_run_status(client: Client) -> None:
    status = await _run_to_end(client, {"definition": _with_whoami(PIPELINE), "input": TEXT})

    assert status["execution_status"] == "Completed", status
    assert {row["name"]: row["status"] for row in status["steps"]} == dict.fromkeys(
        ("slug", "stats", "summary", "whoami"), "Completed"
    )
    summary, whoami = status["result"]["summary"]["data"], status["result"]["whoami"]["data"]
    assert summary["slug"] == {"slug": "hello-plug-in-world"}
    assert summary["stats"] == {
        "distinct": 5,
        "top": [{"count": 2, "word": "cat"}, {"count": 2, "word": "the"}],
        "total": 7,
    }
    assert whoami == {"label": "here", "pid": os.getpid()}  # ran in this process


@pytest.mark.parametrize(
    ("config", "field", "problem"),
    [
        ({"maxLength": 40}, "textInput", "Field required"),
        ({"textInput": "title", "maxLength": "forty"}, "maxLength", "valid integer"),
        ({"textInput": "title", "separator": ""}, "separator", "at least 1 character"),
    ],
    ids=["missing-required", "wrong-type", "out-of-range"],
)
async def test_a_bad_plugin_step_config_is_refused_at_submit_naming_the_step_and_the_field(
    services: RuntimeServices, client: Client, config: dict[str, Any], field: str, problem: str
) -> None:
    queued_before = await services.control_plane.parts.queue.pending_count()

    refused = await failed(client, "submit", {"definition": _bad_step(config), "input": TEXT})
    checked = await ok(client, "pipelines.validate", {"definition": _bad_step(config)})

    assert "[invalid_pipeline] Rule step_config" in refused
    assert "Step 'slug' (example.slugify) has an invalid config" in refused
    assert f"{field}: " in refused and problem in refused
    assert checked["valid"] is False and checked["problem"]["rule"] == "step_config"
    assert f"{field}: " in checked["problem"]["message"]
    assert await services.control_plane.parts.queue.pending_count() == queued_before


async def test_steps_list_and_the_step_resource_publish_plugin_config_schemas(client: Client) -> None:
    listed = await ok(client, "steps.list", {})
    by_key = {entry["step_key"]: entry for entry in listed["steps"]}
    slugify = (await ok(client, "steps.list", {"step_key": "example.slugify"}))["steps"]
    resource = await client.read_resource("step://example.word_stats")
    unknown = await failed(client, "steps.list", {"step_key": "nope.nothing"})

    assert {"example.slugify", "example.word_stats", "plugin.whoami", "rag.retrieval"} <= set(by_key)
    assert "[not_found] No step type 'nope.nothing' is registered." in unknown
    assert slugify == [by_key["example.slugify"]]
    schema = slugify[0]["config_schema"]
    assert schema["required"] == ["textInput"]
    assert set(schema["properties"]) == {"textInput", "separator", "maxLength"}
    assert schema["properties"]["maxLength"]["maximum"] == 256
    assert slugify[0]["description"] == "Turn the text of one input into a lowercase ASCII URL slug."
    word_stats = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
    assert word_stats["source"] == "entry point 'word_stats' (mcp-runtime-example-steps 0.1.0)"
    assert set(word_stats["config_schema"]["properties"]) == {"textInput", "minWordLength", "top"}


async def test_plugin_steps_run_in_an_http_runtime_instance_child_process(services: RuntimeServices) -> None:
    plane = services.control_plane
    assert plane.parts.hosts is not None
    hosted = await plane.parts.hosts.start_host(
        HostLaunch(
            transport=HostTransport.HTTP,
            tenant_id=DEDICATED.tenant_id,
            isolation_mode=IsolationMode.DEDICATED,
            instance_prefix="tenant-a-runtime",
            worker_count=2,
        )
    )
    try:
        submitted = await plane.submit(
            parse_pipeline(_with_whoami(PIPELINE)), TEXT, SubmitMode.DIRECT_DISPATCH, DEDICATED
        )

        async def finished() -> bool:
            view = await plane.run_status(submitted.shared_run_id, DEDICATED)
            return view.execution_status in ("Completed", "Failed")

        await wait_until(finished, timeout=30, interval=0.05)
        view = await plane.run_status(submitted.shared_run_id, DEDICATED)
    finally:
        await plane.parts.hosts.stop_host(hosted.host_id)

    assert view.assigned_runtime_instance_id in hosted.runtime_instance_ids
    assert view.execution_status == "Completed", view
    assert view.result["summary"]["data"]["slug"] == {"slug": "hello-plug-in-world"}
    assert view.result["whoami"]["data"] == {"label": "here", "pid": hosted.pid}  # ran in the child
