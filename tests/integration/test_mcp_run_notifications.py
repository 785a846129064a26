"""Idempotent submit, submit progress, the `run://` resource and its subscriptions through a
real in-memory MCP client session on a real runtime (real Redis, background pump on).

Subscriptions in both eras: `subscriptions/listen` (2026-07-28, the SDK's SubscriptionBus fed
by Redis pub/sub) and `resources/subscribe` (2025-11-25). Another tenant's run never fires
for a stream and reads exactly like an unknown one. (Across two server processes: tests/e2e.)
"""

from __future__ import annotations

import asyncio
import secrets
import warnings
from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import ResourceUpdatedNotification

from mcp_runtime import Principal, ToolBackend
from mcp_runtime.notifications import RunSubscriptionBus, listening_as
from mcp_runtime.tasks import TaskHandle, TasksClientExtension
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.events import RunEvent, RunEventType
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.steps import StepInvocation
from tests.helpers import wait_until
from tests.reliability.mcp_rig import server_for, tool_backend

RAG = {"pipeline": "rag-final-test", "input": {"candidateId": "c-1", "jobId": "j-1"}}
APPROVAL = {"pipeline": "human-approval", "input": {"candidateId": "c-1", "jobId": "j-1"}}
HELD = {"definition": {"name": "held", "steps": [{"name": "hold", "stepKey": "test.progress_hold"}]}}
ACME = Principal(name="acme-operator", user_id="otto", tenant_id="acme", roles=("operator",))
GLOBEX = Principal(name="globex-operator", user_id="gus", tenant_id="globex", roles=("operator",))
UNKNOWN_RUN = "srun_" + "0" * 24


class HoldExecutor:
    """`test.progress_hold`: blocks until released, so a submit stays open while others are served."""

    step_key = "test.progress_hold"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        await self.release.wait()
        return {"data": {"held": invocation.step_name}}


HOLD = HoldExecutor()


class StepwiseExecutor:
    """`test.stepwise`: each step waits until the test finishes it by name."""

    step_key = "test.stepwise"

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}
        self.finished: list[str] = []

    def _gate(self, step: str) -> asyncio.Event:
        return self.gates.setdefault(step, asyncio.Event())

    async def started(self, step: str) -> bool:
        return step in self.gates

    def finish(self, step: str) -> None:
        self.finished.append(step)
        self._gate(step).set()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        await self._gate(invocation.step_name).wait()
        return {"data": {"step": invocation.step_name}}


STEPS = StepwiseExecutor()
STEPWISE = {
    "definition": {
        "name": "stepwise",
        "steps": [
            {"name": "one", "stepKey": "test.stepwise"},
            {"name": "two", "stepKey": "test.stepwise", "dependsOn": ["one"]},
            {"name": "three", "stepKey": "test.stepwise", "dependsOn": ["two"]},
        ],
    }
}


@pytest.fixture
def held() -> Iterator[HoldExecutor]:
    """`test.progress_hold` steps of this test wait until it sets `held.release`."""
    HOLD.release = asyncio.Event()
    yield HOLD
    HOLD.release.set()


@pytest.fixture(scope="module")
async def backend(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ToolBackend]:
    settings = RuntimeSettings(
        redis_url=redis_server.url,
        redis_prefix=f"mcpn{secrets.token_hex(4)}:",
        data_dir=tmp_path_factory.mktemp("mcp-notifications"),
    )
    async with RuntimeServices(settings) as services:
        services.executors.register(HOLD)
        services.executors.register(STEPS)
        yield tool_backend(services)


def client_for(backend: ToolBackend, principal: Principal = ACME, **options: Any) -> Client:
    return Client(server_for(backend, principal), **options)


async def submitted(client: Client, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    result = await client.call_tool("submit", arguments, **options)
    assert not result.is_error and result.structured_content is not None, result.content
    return result.structured_content


def error_of(result: Any) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


async def until_done(client: Client, run_id: str) -> None:
    async def done() -> bool:
        status = await client.call_tool("run.status", {"run_id": run_id})
        return bool(status.structured_content and status.structured_content["done"])

    await wait_until(done, timeout=30, interval=0.05)


# Idempotent submit and callbacks through the tool


async def test_a_repeated_submit_with_one_idempotency_key_returns_the_first_run(backend: ToolBackend) -> None:
    key = f"retry-{secrets.token_hex(4)}"
    async with client_for(backend) as client:
        answers = await asyncio.gather(
            *(submitted(client, {**RAG, "idempotency_key": key}) for _ in range(5))
        )
    assert len({answer["shared_run_id"] for answer in answers}) == 1
    assert sorted(answer["deduplicated"] for answer in answers) == [False, True, True, True, True]


async def test_a_key_reused_with_another_input_is_an_idempotency_conflict(backend: ToolBackend) -> None:
    key = f"conflict-{secrets.token_hex(4)}"
    async with client_for(backend) as client:
        first = await submitted(client, {**RAG, "idempotency_key": key})
        refused = await client.call_tool(
            "submit", {**RAG, "input": {"candidateId": "c-2"}, "idempotency_key": key}
        )
    text = error_of(refused)
    assert text.startswith("[idempotency_conflict]") and first["shared_run_id"] in text
    assert "different pipeline or input" in text and "Next:" in text


async def test_a_callback_url_the_tenant_does_not_allow_list_is_refused(backend: ToolBackend) -> None:
    async with client_for(backend) as client:
        refused = await client.call_tool("submit", {**RAG, "callback_url": "https://hooks.example.com/x"})
    assert error_of(refused).startswith("[callback_not_allowed] callback_url host 'hooks.example.com'")


# Progress of a submit that carries a progress token


async def test_a_submit_with_a_progress_token_reports_each_finished_step_and_answers_when_done(
    backend: ToolBackend,
) -> None:
    """A 3-step chain whose steps the test lets finish one at a time: one report per step."""
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    async def reported(count: int) -> bool:
        return any(done == count for done, _, _ in reports)

    async with client_for(backend) as client:
        following = asyncio.create_task(
            submitted(client, STEPWISE, progress_callback=progress, meta={"progressToken": "p-steps"})
        )
        for count, step in enumerate(("one", "two", "three"), start=1):
            await wait_until(partial(STEPS.started, step), timeout=30)
            STEPS.finish(step)
            await wait_until(partial(reported, count), timeout=30)
        answer = await asyncio.wait_for(following, 30)
    assert answer["run"]["done"] is True and answer["run"]["execution_status"] == "Completed"
    assert [done for done, _, _ in reports] == [0, 1, 2, 3]
    assert {total for _, total, _ in reports[1:]} == {3}
    assert reports[-1][2] == f"run {answer['shared_run_id']}: Completed"


async def test_a_submit_following_its_run_does_not_block_other_requests(
    backend: ToolBackend, held: HoldExecutor
) -> None:
    async with client_for(backend) as client:
        following = asyncio.create_task(submitted(client, HELD, meta={"progressToken": "p-held"}))
        listed = await client.call_tool("pipelines.list", {})
        assert not listed.is_error and not following.done()
        held.release.set()
        answer = await asyncio.wait_for(following, 30)
    assert answer["run"]["done"] is True


async def test_a_submit_that_becomes_a_task_answers_at_once_even_with_a_progress_token(
    backend: ToolBackend, held: HoldExecutor
) -> None:
    async with client_for(backend, extensions=[TasksClientExtension()]) as client:
        handle = await asyncio.wait_for(
            client.session.call_tool("submit", HELD, meta={"progressToken": "p-task"}, allow_claimed=True), 30
        )
        assert isinstance(handle, TaskHandle) and handle.status == "working"
        held.release.set()


async def test_a_submit_with_a_progress_token_answers_once_the_run_waits_for_input(
    backend: ToolBackend,
) -> None:
    async with client_for(backend) as client:
        answer = await submitted(client, APPROVAL, meta={"progressToken": "p-approval"})
        assert answer["run"]["control_status"] == "WaitingForInput" and answer["run"]["done"] is False
        assert answer["run"]["waiting_key"] == "hire-approval"
        await client.call_tool("cancel", {"run_id": answer["shared_run_id"]})


# The run:// resource


async def test_a_fast_run_still_ends_its_progress_at_the_pipelines_step_count(backend: ToolBackend) -> None:
    reports: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append(done)

    async with client_for(backend) as client:
        answer = await submitted(client, RAG, progress_callback=progress, meta={"progressToken": "p-rag"})
    assert answer["run"]["done"] is True and reports == sorted(set(reports))
    assert reports[-1] == len(answer["run"]["steps"]) == 4


async def test_the_run_resource_reads_like_run_status_and_a_foreign_run_like_an_unknown_one(
    backend: ToolBackend,
) -> None:
    async with client_for(backend) as client:
        run_id = (await submitted(client, RAG))["shared_run_id"]
        await until_done(client, run_id)
        content = await client.read_resource(f"run://{run_id}")
    assert f'"shared_run_id": "{run_id}"' in content.contents[0].text  # type: ignore[union-attr]
    assert '"done": true' in content.contents[0].text  # type: ignore[union-attr]
    async with client_for(backend, GLOBEX) as foreign:
        answers = []
        for run in (run_id, UNKNOWN_RUN):
            with pytest.raises(MCPError) as refused:
                await foreign.read_resource(f"run://{run}")
            answers.append((refused.value.error.code, refused.value.error.message.replace(run, "<id>")))
    assert answers[0] == answers[1] and "not found" in answers[0][1]


# Subscriptions: 2026-07-28 subscriptions/listen


async def _first_update(stream: Any) -> ResourceUpdated:
    async for event in stream:
        return event
    raise AssertionError("stream ended without an event")


async def test_a_listen_stream_hears_its_runs_change_through_redis(
    backend: ToolBackend, held: HoldExecutor
) -> None:
    async with client_for(backend) as client:
        run_id = (await submitted(client, HELD))["shared_run_id"]
        uri = f"run://{run_id}"
        async with client.listen(resource_subscriptions=[uri]) as stream:
            assert stream.honored.resource_subscriptions == [uri]
            held.release.set()
            heard = await asyncio.wait_for(_first_update(stream), 30)
    assert heard == ResourceUpdated(uri=uri)


async def test_the_listen_bus_hands_a_run_event_only_to_streams_of_the_runs_tenant(
    backend: ToolBackend,
) -> None:
    assert backend.run_events is not None
    bus = RunSubscriptionBus(backend.run_events)
    heard: dict[str, list[object]] = {"acme": [], "globex": []}
    for tenant, events in heard.items():
        with listening_as(tenant):
            bus.subscribe(events.append)
    event = RunEvent(
        event_id="evt_x",
        type=RunEventType.COMPLETED,
        tenant_id="acme",
        shared_run_id="srun_x",
        execution_id="exec_x",
    )
    backend.run_events.deliver(event)
    assert heard == {
        "acme": [ResourceUpdated(uri="run://srun_x"), ResourceUpdated(uri="run://exec_x")],
        "globex": [],
    }


# Subscriptions: 2025-11-25 resources/subscribe


async def test_a_legacy_subscriber_is_told_when_its_run_changes_and_a_foreign_one_cannot_subscribe(
    backend: ToolBackend, held: HoldExecutor
) -> None:
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updates.append(message.params.uri)

    async with client_for(backend, mode="legacy", message_handler=on_message) as acme:
        assert acme.server_capabilities.resources is not None and acme.server_capabilities.resources.subscribe
        run_id = (await submitted(acme, HELD))["shared_run_id"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe is deprecated in the 2026 era, not here
            await acme.subscribe_resource(f"run://{run_id}")
            async with client_for(backend, GLOBEX, mode="legacy") as globex:
                errors = []
                for run in (run_id, UNKNOWN_RUN):
                    with pytest.raises(MCPError) as refused:
                        await globex.subscribe_resource(f"run://{run}")
                    errors.append(
                        (refused.value.error.code, refused.value.error.message.replace(run, "<id>"))
                    )
        held.release.set()
        await until_done(acme, run_id)

        async def told() -> bool:
            return f"run://{run_id}" in updates

        await wait_until(told, timeout=10)
    assert errors[0] == errors[1] and errors[0][1].startswith("[not_found]")
