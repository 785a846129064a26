"""Every MCP tool through a real in-memory MCP client session on a real runtime (real Redis):
happy paths, invalid input, unknown ids, denied roles and foreign tenants."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult

from mcp_runtime import (
    DEFAULT_PIPELINES_DIR,
    DEFAULT_RBAC_MODEL,
    DEFAULT_RBAC_POLICY,
    TOOL_PERMISSIONS,
    Authorizer,
    BearerPrincipal,
    FixedPrincipal,
    Principal,
    ToolBackend,
    ToolGuard,
    build_server,
)
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings, RunStatusView, run_is_done
from runtime_core.errors import InvalidPipelineError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import HotStateRetention, LifecycleSettings
from runtime_core.pipeline import PipelineCatalog, parse_pipeline
from runtime_core.steps import StepInvocation
from runtime_core.storage import ForensicsRecord
from tests.helpers import wait_until

RAG_INPUT = {"candidateId": "c-1", "jobId": "j-1"}
ACME_ADMIN = Principal(name="acme-admin", user_id="ada", tenant_id="acme", roles=("admin",))
ACME_OPERATOR = Principal(name="acme-operator", user_id="otto", tenant_id="acme", roles=("operator",))
ACME_VIEWER = Principal(name="acme-viewer", user_id="vera", tenant_id="acme", roles=("viewer",))
GLOBEX_OPERATOR = Principal(name="globex-operator", user_id="gus", tenant_id="globex", roles=("operator",))


class HoldExecutor:
    """`test.hold`: blocks each call until the test releases it, so an execution stays running."""

    step_key = "test.hold"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.started.set()
        await self.release.wait()
        return {"data": {"held": invocation.step_name}}


HOLD = HoldExecutor()


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Any]:
    settings = RuntimeSettings(
        redis_url=redis_server.url,
        redis_prefix=f"mcp{secrets.token_hex(4)}:",
        data_dir=tmp_path_factory.mktemp("mcp-tools"),
        control_plane=ControlPlaneSettings(
            background_pump=False,
            workers_per_instance=8,
            max_local_workers_per_execution=2,
            # Some tests here read the live hot state of runs finished earlier in the module
            # (replay of a live execution): keep finished runs in Redis for the module's life.
            lifecycle=LifecycleSettings(hot=HotStateRetention(grace_ms=3_600_000)),
        ),
    )
    async with RuntimeServices(settings) as started:
        started.executors.register(HOLD)
        yield started


@pytest.fixture(scope="module")
def backend(services: RuntimeServices) -> ToolBackend:
    return ToolBackend.from_services(services, PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR))


AUTHORIZER = Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY)


def session(backend: ToolBackend, principal: Principal) -> Client:
    return Client(build_server(backend, ToolGuard(FixedPrincipal(principal), AUTHORIZER)))


async def ok(client: Client, tool: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments, **options)
    assert not result.is_error, error_text(result)
    assert result.structured_content is not None
    return result.structured_content


async def failed(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return error_text(result)


def error_text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def submit_and_drain(client: Client, arguments: dict[str, Any]) -> str:
    """Submit, then drain until this run is dispatched (busy instances leave runs queued)."""
    run_id = (await ok(client, "submit", arguments))["shared_run_id"]

    async def dispatched() -> bool:
        await ok(client, "queue.drain", {"max_count": 50})
        return (await ok(client, "run.status", {"run_id": run_id}))["local_run_id"] is not None

    await wait_until(dispatched, timeout=20, interval=0.05)
    return run_id


async def finished_status(client: Client, run_id: str) -> dict[str, Any]:
    async def done() -> bool:
        return bool((await ok(client, "run.status", {"run_id": run_id}))["done"])

    await wait_until(done, timeout=20, interval=0.02)
    return await ok(client, "run.status", {"run_id": run_id})


@pytest.fixture(scope="module")
async def completed_rag_run(backend: ToolBackend) -> dict[str, Any]:
    async with session(backend, ACME_OPERATOR) as client:
        run_id = await submit_and_drain(client, {"pipeline": "rag-final-test", "input": RAG_INPUT})
        return await finished_status(client, run_id)


# Discovery


async def test_server_lists_every_dotted_tool_with_a_description(backend: ToolBackend) -> None:
    async with session(backend, ACME_VIEWER) as client:
        tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == set(TOOL_PERMISSIONS)
    assert all(tool.description and tool.output_schema for tool in tools)


# submit


async def test_submit_queue_first_queues_the_run_globally_in_the_callers_tenant(backend: ToolBackend) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        submitted = await ok(client, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT})
        status = await ok(client, "run.status", {"run_id": submitted["shared_run_id"]})
    assert (submitted["status"], submitted["mode"], submitted["tenant_id"]) == (
        "QueuedGlobally",
        "QueueFirst",
        "acme",
    )
    assert submitted["local_run_id"] is None and status["execution_id"] is None
    assert "queue.drain" in submitted["next_step"]


async def test_submit_persists_the_callers_snapshot_on_the_shared_run(
    backend: ToolBackend, services: RuntimeServices
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        run_id = (await ok(client, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT}))[
            "shared_run_id"
        ]
    record = await services.control_plane.parts.runs.get(run_id)
    assert record is not None and record.snapshot is not None
    assert (record.snapshot.tenant_id, record.snapshot.user_id, record.snapshot.roles) == (
        "acme",
        "otto",
        ("operator",),
    )
    assert record.snapshot.context_key.startswith("mcp:submit:")


async def test_snapshot_captured_at_submit_is_the_one_the_execution_runs_with(
    backend: ToolBackend, services: RuntimeServices
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        run_id = await submit_and_drain(client, {"pipeline": "rag-final-test", "input": RAG_INPUT})
        execution_id = (await finished_status(client, run_id))["execution_id"]
    shared = await services.control_plane.parts.runs.get(run_id)
    meta = await services.dag_store.load_meta(execution_id)
    assert shared is not None and meta is not None
    assert meta.snapshot == shared.snapshot


async def test_submit_inline_definition_runs_to_completion(backend: ToolBackend) -> None:
    definition = {"name": "inline-two", "steps": [{"name": "a", "stepKey": "test.noop"}]}
    async with session(backend, ACME_OPERATOR) as client:
        run_id = await submit_and_drain(client, {"definition": definition})
        status = await finished_status(client, run_id)
    assert status["execution_status"] == "Completed"


async def test_submit_cyclic_pipeline_is_refused_with_the_broken_rule(backend: ToolBackend) -> None:
    cyclic = {
        "name": "cyclic",
        "steps": [
            {"name": "a", "stepKey": "test.noop", "dependsOn": ["b"]},
            {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
        ],
    }
    async with session(backend, ACME_OPERATOR) as client:
        text = await failed(client, "submit", {"definition": cyclic})
    assert "[invalid_pipeline]" in text and "cycle" in text.lower()


async def test_submit_unknown_catalog_pipeline_is_not_found_and_lists_known_ones(
    backend: ToolBackend,
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        text = await failed(client, "submit", {"pipeline": "no-such-pipeline"})
    assert "[not_found]" in text and "rag-final-test" in text


async def test_submit_with_both_name_and_definition_is_invalid_arguments(backend: ToolBackend) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        text = await failed(client, "submit", {"pipeline": "rag-final-test", "definition": {"name": "x"}})
    assert "[invalid_arguments]" in text and "exactly one" in text


# queue.drain, run.status


async def test_drain_dispatches_queued_runs_and_reports_progress(backend: ToolBackend) -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async with session(backend, ACME_OPERATOR) as client:
        run_id = (await ok(client, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT}))[
            "shared_run_id"
        ]
        drained = await ok(client, "queue.drain", {"max_count": 50}, progress_callback=on_progress)
    mine = next(run for run in drained["runs"] if run["shared_run_id"] == run_id)
    assert mine["outcome"] == "Dispatched" and mine["local_run_id"].startswith("lrun_")
    assert any(run_id in (message or "") and total == 50 for _, total, message in reports)


async def test_rag_run_completes_with_steps_and_result_in_run_status(
    completed_rag_run: dict[str, Any],
) -> None:
    assert completed_rag_run["execution_status"] == "Completed"
    assert [step["status"] for step in completed_rag_run["steps"]] == ["Completed"] * 4
    assert completed_rag_run["result"]["data"]["context"]


async def test_run_status_answers_the_same_run_for_local_run_id_and_execution_id(
    backend: ToolBackend, completed_rag_run: dict[str, Any]
) -> None:
    async with session(backend, ACME_VIEWER) as client:
        by_local = await ok(client, "run.status", {"run_id": completed_rag_run["local_run_id"]})
        by_execution = await ok(client, "run.status", {"run_id": completed_rag_run["execution_id"]})
    assert by_local["shared_run_id"] == by_execution["shared_run_id"] == completed_rag_run["shared_run_id"]


async def test_run_status_of_unknown_id_is_not_found(backend: ToolBackend) -> None:
    async with session(backend, ACME_VIEWER) as client:
        text = await failed(client, "run.status", {"run_id": "srun_000000000000unknown"})
    assert "[not_found]" in text


# instances.list, capacity.list


async def test_capacity_list_shows_a_viewer_the_shared_instance_without_its_activity(
    backend: ToolBackend,
) -> None:
    async with session(backend, ACME_VIEWER) as client:
        listed = await ok(client, "capacity.list", {})
    assert listed["tenant_id"] == "acme" and listed["instances"]
    instance = listed["instances"][0]
    assert instance["isolation_mode"] == "Shared" and instance["dedicated_to_tenant"] is False
    assert instance["worker_count"] > 0 and instance["live"] is True
    activity = ("active_worker_count", "queued_run_count", "running_run_count", "available_run_slots")
    assert [instance[field] for field in (*activity, "can_accept_run")] == [None] * 5


async def test_instances_list_shows_every_capacity_field_of_the_local_instance(backend: ToolBackend) -> None:
    async with session(backend, ACME_ADMIN) as client:
        listed = await ok(client, "instances.list", {})
    assert listed["tenant_id"] == "acme" and listed["instances"]
    instance = listed["instances"][0]
    seed_fields = (
        "worker_count",
        "active_worker_count",
        "available_worker_count",
        "max_local_workers_per_execution",
        "queued_run_count",
        "running_run_count",
        "active_run_count",
        "available_run_slots",
        "is_queue_paused",
        "can_accept_run",
        "last_heartbeat_at",
        "tenant_id",
        "tenant_group_id",
        "isolation_mode",
        "prefer_dedicated_capacity",
        "allow_shared_fallback",
        "provider_name",
        "provider_endpoint",
    )
    assert set(seed_fields) <= set(instance)
    assert instance["live"] and instance["isolation_mode"] == "Shared"


# cancel


async def test_cancel_queued_run_cancels_it_before_any_dispatch(backend: ToolBackend) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        run_id = (await ok(client, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT}))[
            "shared_run_id"
        ]
        cancelled = await ok(client, "cancel", {"run_id": run_id})
        status = await ok(client, "run.status", {"run_id": run_id})
    assert cancelled["shared_status"] == "Cancelled" and cancelled["local_run_id"] is None
    assert status["done"] and status["execution_id"] is None


async def test_cancel_unknown_run_is_not_found(backend: ToolBackend) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        text = await failed(client, "cancel", {"run_id": "lrun_000000000000unknown"})
    assert "[not_found]" in text


# pause, resume


async def test_pause_settles_paused_and_resume_completes_the_run(backend: ToolBackend) -> None:
    held = {
        "name": "held",
        "steps": [
            {"name": "hold", "stepKey": "test.hold"},
            {"name": "after", "stepKey": "test.noop", "dependsOn": ["hold"]},
        ],
    }
    async with session(backend, ACME_OPERATOR) as client:
        run_id = await submit_and_drain(client, {"definition": held})
        await asyncio.wait_for(HOLD.started.wait(), timeout=10)
        execution_id = (await ok(client, "run.status", {"run_id": run_id}))["execution_id"]
        paused = await ok(client, "pause", {"execution_id": execution_id})
        HOLD.release.set()

        async def settled_paused() -> bool:
            return (await ok(client, "run.status", {"run_id": run_id}))["control_status"] == "Paused"

        await wait_until(settled_paused, timeout=10)
        resumed = await ok(client, "resume", {"execution_id": execution_id})
        final = await finished_status(client, run_id)
    assert final["execution_status"] == "Completed"
    assert (paused["control_status"], paused["action"], paused["version"]) == ("Pausing", "Pause", 1)
    assert (resumed["control_status"], resumed["action"]) == ("Resuming", "Resume")
    assert resumed["version"] > paused["version"]


async def test_pause_of_finished_execution_is_a_conflict_saying_what_to_do(
    backend: ToolBackend, completed_rag_run: dict[str, Any]
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        text = await failed(client, "pause", {"execution_id": completed_rag_run["execution_id"]})
    assert text.count("[conflict]") == 1 and "Next:" in text


async def test_resume_of_unknown_execution_is_not_found(backend: ToolBackend) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        text = await failed(client, "resume", {"execution_id": "exec_000000000000unknown"})
    assert "[not_found]" in text


# input.submit


async def test_human_input_with_the_wrong_key_is_refused_and_the_right_key_completes_the_run(
    backend: ToolBackend,
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        run_id = await submit_and_drain(client, {"pipeline": "human-approval", "input": RAG_INPUT})

        async def waiting() -> bool:
            return (await ok(client, "run.status", {"run_id": run_id}))["control_status"] == "WaitingForInput"

        await wait_until(waiting, timeout=20)
        status = await ok(client, "run.status", {"run_id": run_id})
        answer = {"execution_id": status["execution_id"], "payload": {"approved": True}}
        wrong = await failed(client, "input.submit", {**answer, "waiting_key": "other"})
        accepted = await ok(client, "input.submit", {**answer, "waiting_key": "hire-approval"})
        final = await finished_status(client, run_id)
    assert final["execution_status"] == "Completed"
    assert status["done"] is False
    assert "[conflict]" in wrong and "'hire-approval'" in wrong
    assert (accepted["control_status"], accepted["action"], accepted["waiting_key"]) == (
        "Resuming",
        "SubmitInput",
        None,
    )


# replay, ledger, trace, forensics


async def test_replay_of_live_execution_reports_already_exists_and_restores_nothing(
    backend: ToolBackend, completed_rag_run: dict[str, Any]
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        replayed = await ok(client, "replay", {"execution_id": completed_rag_run["execution_id"]})
    assert (replayed["already_exists"], replayed["restored"], replayed["source"]) == (True, False, "live")


async def test_replay_after_live_state_deletion_restores_the_completed_execution(
    backend: ToolBackend, services: RuntimeServices
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        run_id = await submit_and_drain(client, {"pipeline": "rag-final-test", "input": RAG_INPUT})
        execution_id = (await finished_status(client, run_id))["execution_id"]
        await services.dag_store.delete_execution(execution_id)
        replayed = await ok(client, "replay", {"execution_id": execution_id})
        status = await ok(client, "run.status", {"run_id": execution_id})
    assert (replayed["already_exists"], replayed["restored"]) == (False, True)
    assert status["execution_status"] == "Completed"


async def test_ledger_of_a_shared_run_lists_its_step_and_finalize_events(
    backend: ToolBackend, completed_rag_run: dict[str, Any]
) -> None:
    async with session(backend, ACME_VIEWER) as client:
        ledger = await ok(client, "ledger", {"run_id": completed_rag_run["shared_run_id"]})
    events = [entry["event"] for entry in ledger["entries"]]
    assert "step.completed" in events and events[-1] == "execution.finalized"


async def test_ledger_by_execution_id_matches_the_execution(
    backend: ToolBackend, completed_rag_run: dict[str, Any]
) -> None:
    async with session(backend, ACME_VIEWER) as client:
        ledger = await ok(client, "ledger", {"run_id": completed_rag_run["execution_id"]})
    assert {entry["execution_id"] for entry in ledger["entries"]} == {completed_rag_run["execution_id"]}


async def test_trace_of_a_shared_run_has_one_span_per_step_and_one_for_the_execution(
    backend: ToolBackend, completed_rag_run: dict[str, Any]
) -> None:
    async with session(backend, ACME_VIEWER) as client:
        trace = await ok(client, "trace", {"run_id": completed_rag_run["shared_run_id"]})
    assert trace["execution_id"] == completed_rag_run["execution_id"]
    assert {span["step_name"] for span in trace["spans"]} == {None, "candidate", "job", "merge", "compose"}
    assert len({span["trace_id"] for span in trace["spans"]}) == 1


async def test_trace_of_a_run_not_yet_dispatched_is_not_found_saying_to_drain(backend: ToolBackend) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        run_id = (await ok(client, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT}))[
            "shared_run_id"
        ]
        text = await failed(client, "trace", {"run_id": run_id})
        await ok(client, "cancel", {"run_id": run_id})
    assert "[not_found]" in text and "queue.drain" in text


async def test_forensics_lists_the_tenants_recovery_records_filtered_by_lost_instance(
    backend: ToolBackend, services: RuntimeServices
) -> None:
    lost = f"rt_lost{secrets.token_hex(3)}"
    record = ForensicsRecord(
        tenant_id="acme", runtime_instance_id=lost, execution_id="exec_x", kind="execution", action="resumed"
    )
    await services.durable_store.put_forensics(record)
    async with session(backend, ACME_VIEWER) as acme:
        mine = await ok(acme, "forensics", {"runtime_instance_id": lost})
    async with session(backend, GLOBEX_OPERATOR) as globex:
        foreign = await ok(globex, "forensics", {"runtime_instance_id": lost})
    assert [(row["record_id"], row["action"]) for row in mine["records"]] == [(record.record_id, "resumed")]
    assert foreign["records"] == []


# pipelines.list, pipelines.validate, resources, prompt


async def test_pipelines_list_shows_the_example_catalog_with_resource_uris(backend: ToolBackend) -> None:
    async with session(backend, ACME_VIEWER) as client:
        listed = await ok(client, "pipelines.list", {})
    by_name = {pipeline["name"]: pipeline for pipeline in listed["pipelines"]}
    assert {"rag-final-test", "fan-out", "human-approval", "flaky-retry"} <= set(by_name)
    assert by_name["rag-final-test"]["resource_uri"] == "pipeline://rag-final-test"


async def test_pipelines_validate_accepts_a_catalog_pipeline(backend: ToolBackend) -> None:
    async with session(backend, ACME_VIEWER) as client:
        checked = await ok(client, "pipelines.validate", {"pipeline": "rag-final-test"})
    assert (checked["valid"], checked["step_count"]) == (True, 4)


async def test_pipelines_validate_names_the_unregistered_step_key(backend: ToolBackend) -> None:
    definition = {"name": "bad", "steps": [{"name": "a", "stepKey": "no.such.step"}]}
    async with session(backend, ACME_VIEWER) as client:
        checked = await ok(client, "pipelines.validate", {"definition": definition})
    assert checked["valid"] is False
    assert (
        checked["problem"]["rule"] == "step_keys_registered"
        and "no.such.step" in checked["problem"]["message"]
    )


UNCONFIGURED_PROVIDER = {
    "name": "needs-postgres",
    "steps": [
        {
            "name": "candidate",
            "stepKey": "rag.retrieval",
            "config": {"operation": "candidate.byId", "provider": "relational", "providerKey": "postgres"},
        }
    ],
}


BAD_RETENTION = {
    "name": "bad-retention",
    "config": {"retention": ["retention.nope"]},
    "steps": [{"name": "a", "stepKey": "test.noop"}],
}


@pytest.mark.parametrize(
    ("definition", "rule", "named", "hinted"),
    [
        (BAD_RETENTION, "retention_valid", "retention.nope", "retention.hybrid.default"),
        (UNCONFIGURED_PROVIDER, "provider_configured", "relational/postgres", "providers file"),
    ],
)
async def test_pipelines_validate_and_submit_refuse_what_this_runtime_cannot_run(
    backend: ToolBackend, definition: dict[str, Any], rule: str, named: str, hinted: str
) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        checked = await ok(client, "pipelines.validate", {"definition": definition})
        refused = await failed(client, "submit", {"definition": definition})
    assert checked["valid"] is False
    assert checked["problem"]["rule"] == rule
    assert named in checked["problem"]["message"]
    assert hinted in checked["problem"]["hint"]
    assert "[invalid_pipeline]" in refused and named in refused


async def test_the_engine_refuses_an_unknown_retention_policy_at_create_time(
    services: RuntimeServices,
) -> None:
    snapshot = ExecutionContextSnapshot(user_id="ada", tenant_id="acme")
    with pytest.raises(InvalidPipelineError) as caught:
        await services.engine.create_execution(parse_pipeline(BAD_RETENTION), {}, snapshot)
    assert caught.value.rule == "retention_valid"


def agent_with_pipeline_tool(pipeline: Any) -> dict[str, Any]:
    tool = {"name": "fan", "pipeline": pipeline}
    step = {"name": "agent", "stepKey": "ai.agent", "config": {"prompt": "Fan out", "tools": [tool]}}
    return {"name": f"agent-{secrets.token_hex(3)}", "steps": [step]}


async def test_an_agent_tool_naming_a_catalog_pipeline_runs_its_definition_stored_with_the_run(
    backend: ToolBackend, services: RuntimeServices
) -> None:
    definition = agent_with_pipeline_tool("fan-out")
    async with session(backend, ACME_OPERATOR) as client:
        checked = await ok(client, "pipelines.validate", {"definition": definition})
        submitted = await ok(client, "submit", {"definition": definition})
    assert checked["valid"] is True
    snapshot = ExecutionContextSnapshot(user_id="otto", tenant_id="acme")
    stored = await services.control_plane.run_pipeline(submitted["shared_run_id"], snapshot)
    assert stored is not None
    [tool] = stored.steps[0].config["tools"]
    catalog = PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR)
    assert parse_pipeline(tool["pipeline"]) == catalog.get("fan-out")  # the catalog's, inline


async def test_an_agent_tool_naming_an_unknown_pipeline_is_refused_at_submit(backend: ToolBackend) -> None:
    definition = agent_with_pipeline_tool("no-such-pipeline")
    async with session(backend, ACME_OPERATOR) as client:
        checked = await ok(client, "pipelines.validate", {"definition": definition})
        refused = await failed(client, "submit", {"definition": definition})
    assert checked["valid"] is False and checked["problem"]["rule"] == "step_config"
    message = checked["problem"]["message"]
    assert "tool 'fan' names pipeline 'no-such-pipeline', which is not in the catalog" in message
    assert "fan-out" in checked["problem"]["hint"]  # the known pipelines
    assert "[invalid_pipeline]" in refused and "no-such-pipeline" in refused


BAD_RETRY = {
    "name": "bad-retry",
    "steps": [
        {
            "name": "a",
            "stepKey": "test.noop",
            "config": {"retry": {"maxRetries": 2, "policies": ["retry.nope"]}},
        }
    ],
}
BAD_CONCURRENCY = {
    "name": "bad-concurrency",
    "config": {"concurrency": {"policies": [{"name": "concurrency.nope", "config": {}}]}},
    "steps": [{"name": "a", "stepKey": "test.noop"}],
}


@pytest.mark.parametrize(
    ("definition", "policy"), [(BAD_RETRY, "retry.nope"), (BAD_CONCURRENCY, "concurrency.nope")]
)
async def test_pipelines_validate_and_submit_in_both_modes_refuse_an_unknown_retry_or_concurrency_policy(
    services: RuntimeServices, backend: ToolBackend, definition: dict[str, Any], policy: str
) -> None:
    parts = services.control_plane.parts
    pending_before = await parts.queue.pending_count()
    newest_before = [run.shared_run_id for run in await parts.runs.list_tenant("acme", limit=1)]
    async with session(backend, ACME_OPERATOR) as client:
        checked = await ok(client, "pipelines.validate", {"definition": definition})
        refusals = [
            await failed(client, "submit", {"definition": definition, "mode": mode})
            for mode in ("QueueFirst", "DirectDispatch")
        ]
    problem = checked["problem"]
    assert checked["valid"] is False and problem["rule"] == "policies_valid"
    assert problem["message"].startswith("Step 'a':") and policy in problem["message"]
    assert "registered" in problem["hint"]
    for refused in refusals:
        assert refused.endswith(
            f"[invalid_pipeline] Rule policies_valid: {problem['message']} Next: {problem['hint']}"
        )
    # Refused before anything was stored: no shared run, no queue item.
    assert await parts.queue.pending_count() == pending_before
    assert [run.shared_run_id for run in await parts.runs.list_tenant("acme", limit=1)] == newest_before


async def test_pipeline_resource_serves_the_catalog_definition(backend: ToolBackend) -> None:
    async with session(backend, ACME_VIEWER) as client:
        templates = (await client.list_resource_templates()).resource_templates
        content = await client.read_resource("pipeline://rag-final-test")
    assert sorted(template.uri_template for template in templates) == [
        "pipeline://{name}",
        "recovery://report/{instance}",  # tests/integration/test_recovery_report.py
        "run://{run_id}",
        "step://{step_key}",
        "ui://mcp-runtime/runs/{run_id}",  # the MCP Apps run view (tests/integration/test_run_view_app.py)
    ]
    assert '"stepKey": "rag.retrieval"' in content.contents[0].text  # type: ignore[union-attr]


async def test_run_pipeline_prompt_names_the_state_fields_and_the_tool_sequence(backend: ToolBackend) -> None:
    async with session(backend, ACME_VIEWER) as client:
        prompt = await client.get_prompt("run_pipeline", {"pipeline": "rag-final-test"})
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert "'candidateId', 'jobId'" in text
    assert text.index("`submit`") < text.index("`queue.drain`") < text.index("`run.status`")


# Authorization and authentication


async def test_viewer_submit_is_denied_naming_role_tenant_and_missing_permission(
    backend: ToolBackend,
) -> None:
    async with session(backend, ACME_VIEWER) as client:
        text = await failed(client, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT})
    assert "permission denied: role(s) [viewer] in tenant 'acme' lack 'run:submit'" in text


async def test_operator_instances_list_is_denied(backend: ToolBackend) -> None:
    async with session(backend, ACME_OPERATOR) as client:
        text = await failed(client, "instances.list", {})
    assert "lack 'instance:read'" in text


async def test_denied_call_is_refused_before_argument_checks(backend: ToolBackend) -> None:
    async with session(backend, ACME_VIEWER) as client:
        text = await failed(client, "submit", {"pipeline": "x", "definition": {"name": "y"}})
    assert "[permission_denied]" in text


async def test_principal_without_roles_is_denied_every_tool(backend: ToolBackend) -> None:
    nobody = Principal(name="nobody", user_id="nobody", tenant_id="acme")
    async with session(backend, nobody) as client:
        text = await failed(client, "pipelines.list", {})
    assert "role(s) [] in tenant 'acme' lack 'pipeline:read'" in text


async def test_bearer_principal_source_without_a_token_gets_no_tools(backend: ToolBackend) -> None:
    guard = ToolGuard(BearerPrincipal(), AUTHORIZER)
    async with Client(build_server(backend, guard)) as client:
        text = await failed(client, "pipelines.list", {})
    assert "[unauthenticated]" in text


# Tenant isolation: a foreign tenant's ids answer exactly like unknown ids


def _without_id(text: str, run_id: str) -> str:
    return text.replace(run_id, "<id>")


@pytest.mark.parametrize(
    ("tool", "field", "id_kind"),
    [
        ("run.status", "run_id", "shared_run_id"),
        ("run.status", "run_id", "local_run_id"),
        ("run.status", "run_id", "execution_id"),
        ("ledger", "run_id", "shared_run_id"),
        ("ledger", "run_id", "execution_id"),
        ("trace", "run_id", "shared_run_id"),
        ("cancel", "run_id", "shared_run_id"),
        ("pause", "execution_id", "execution_id"),
        ("resume", "execution_id", "execution_id"),
        ("replay", "execution_id", "execution_id"),
    ],
)
async def test_foreign_tenant_gets_the_unknown_id_answer(
    backend: ToolBackend, completed_rag_run: dict[str, Any], tool: str, field: str, id_kind: str
) -> None:
    foreign_id: str = completed_rag_run[id_kind]
    unknown_id = foreign_id[: foreign_id.index("_") + 1] + "0" * 24
    async with session(backend, GLOBEX_OPERATOR) as client:
        foreign = await failed(client, tool, {field: foreign_id})
        unknown = await failed(client, tool, {field: unknown_id})
    assert "[not_found]" in foreign
    assert _without_id(foreign, foreign_id) == _without_id(unknown, unknown_id)


async def test_foreign_tenant_input_submit_gets_the_unknown_id_answer(
    backend: ToolBackend, completed_rag_run: dict[str, Any]
) -> None:
    foreign_id = completed_rag_run["execution_id"]
    arguments = {"waiting_key": "hire-approval", "payload": {}}
    async with session(backend, GLOBEX_OPERATOR) as client:
        foreign = await failed(client, "input.submit", {"execution_id": foreign_id, **arguments})
        unknown = await failed(client, "input.submit", {"execution_id": "exec_" + "0" * 24, **arguments})
    assert _without_id(foreign, foreign_id) == _without_id(unknown, "exec_" + "0" * 24)


async def test_foreign_tenant_drain_lists_none_of_the_other_tenants_runs(
    backend: ToolBackend,
) -> None:
    async with session(backend, ACME_OPERATOR) as acme:
        run_id = (await ok(acme, "submit", {"pipeline": "rag-final-test", "input": RAG_INPUT}))[
            "shared_run_id"
        ]
    async with session(backend, GLOBEX_OPERATOR) as globex:
        drained = await ok(globex, "queue.drain", {"max_count": 50})
    assert run_id not in {run["shared_run_id"] for run in drained["runs"]}


def test_example_pipelines_directory_is_the_default_catalog() -> None:
    assert Path(DEFAULT_PIPELINES_DIR, "rag-final-test.json").is_file()


def test_a_run_is_done_only_once_its_local_run_closed_after_the_execution_finished() -> None:
    """The instance closes the local run after the engine's observers wrote the audit records."""

    def view(**statuses: str) -> RunStatusView:
        return RunStatusView(requested_id="srun_x", tenant_id="acme", **statuses)

    assert not run_is_done(view(execution_status="Completed", local_status="Running"))
    assert run_is_done(view(execution_status="Completed", local_status="Completed"))
    assert not run_is_done(view(execution_status="Running", local_status="Running"))
    assert run_is_done(view(shared_status="Rejected"))
    assert run_is_done(view(shared_status="Cancelled", local_status="Cancelled"))


def test_a_failed_attempt_of_a_shared_run_queued_again_or_superseded_is_not_done() -> None:
    """Issue 13.4: `done` needs the shared run's agreement, not only the latest local attempt's."""
    failed = {"local_run_id": "lrun_1", "local_status": "Failed"}
    for waiting in ("QueuedGlobally", "ScaleOutRequested", "Submitted"):
        assert not run_is_done(
            RunStatusView(requested_id="srun_x", tenant_id="acme", shared_status=waiting, **failed)
        )
    older = RunStatusView(requested_id="lrun_1", tenant_id="acme", shared_status="Dispatched", **failed)
    assert run_is_done(older)
    older.mark_attempt_superseded()  # the shared run is dispatched to another local run now
    assert not run_is_done(older)
