"""TaskService on a real runtime (real redis-server): a run followed as a task, from creation to
its terminal status, with the human-input gate, cancellation, TTL expiry, tenant isolation and
listing. The MCP wire forms are tested end to end in tests/e2e/test_mcp_tasks.py."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineCatalog, PipelineDefinition, parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.steps import HumanApprovalExecutor
from runtime_core.tasks import (
    InvalidTaskCursorError,
    TaskNotFoundError,
    TaskService,
    TaskSettings,
    TaskStatus,
    TaskStore,
    TaskTerminalError,
    TaskView,
)
from tests.helpers import wait_until

ACME = ExecutionContextSnapshot(user_id="otto", tenant_id="acme", context_key="tasks-acme")
GLOBEX = ExecutionContextSnapshot(user_id="gus", tenant_id="globex", context_key="tasks-globex")
CATALOG = PipelineCatalog.from_directory(Path(__file__).resolve().parents[2] / "examples" / "pipelines")
RAG_INPUT = {"candidateId": "c-1", "jobId": "j-1"}
FAILING = parse_pipeline(
    {"name": "failing", "steps": [{"name": "boom", "stepKey": "test.flaky", "config": {"failTimes": 9}}]}
)


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeServices]:
    settings = RuntimeSettings(
        redis_url=redis_server.url,
        redis_prefix=f"tasks{secrets.token_hex(4)}:",
        data_dir=tmp_path_factory.mktemp("tasks"),
        control_plane=ControlPlaneSettings(workers_per_instance=4, max_concurrent_runs_per_instance=8),
    )
    async with RuntimeServices(settings) as started:
        yield started


def task_service(services: RuntimeServices, **settings: Any) -> TaskService:
    return TaskService(
        TaskStore(services.hot_state),
        services.control_plane,
        services.control,
        services.engine,
        TaskSettings(**settings),
    )


@pytest.fixture(scope="module")
def tasks(services: RuntimeServices) -> TaskService:
    return task_service(services, poll_interval_ms=50)


async def submitted(
    tasks: TaskService,
    pipeline: PipelineDefinition,
    state: dict[str, Any],
    snapshot: ExecutionContextSnapshot = ACME,
) -> TaskView:
    result = await tasks.control_plane.submit(pipeline, state, SubmitMode.QUEUE_FIRST, snapshot)
    return await tasks.create(
        "submit", result.shared_run_id, {"shared_run_id": result.shared_run_id}, snapshot
    )


async def status_becomes(tasks: TaskService, task_id: str, wanted: TaskStatus) -> TaskView:
    async def reached() -> bool:
        return (await tasks.get(task_id, ACME)).status is wanted

    await wait_until(reached, timeout=30, interval=0.02)
    return await tasks.get(task_id, ACME)


async def test_a_new_task_is_working_and_stored_before_it_is_returned(tasks: TaskService) -> None:
    created = await submitted(tasks, CATALOG.get("rag-final-test"), RAG_INPUT)
    stored = await tasks.store.load(created.record.task_id)
    assert created.status is TaskStatus.WORKING and stored is not None
    assert (stored.tenant_id, stored.user_id, stored.tool) == ("acme", "otto", "submit")
    assert created.record.task_id.startswith("task_") and len(created.record.task_id) == 37
    assert stored.created_at_ms == created.record.created_at_ms > 0


async def test_a_completed_run_completes_its_task_with_the_run_status(tasks: TaskService) -> None:
    created = await submitted(tasks, CATALOG.get("rag-final-test"), RAG_INPUT)
    done = await status_becomes(tasks, created.record.task_id, TaskStatus.COMPLETED)
    assert done.run is not None and done.run.execution_status == "Completed"
    assert done.run.result is not None and done.failure is None
    assert done.last_updated_at_ms >= done.record.created_at_ms


async def test_a_failed_run_fails_its_task_with_the_failing_steps_code_and_message(
    tasks: TaskService,
) -> None:
    created = await submitted(tasks, FAILING, {})
    failed = await status_becomes(tasks, created.record.task_id, TaskStatus.FAILED)
    assert failed.failure is not None
    assert (failed.failure.code, failed.failure.step) == ("transient", "boom")
    assert "test.flaky step 'boom' fails attempt" in failed.failure.message
    assert failed.status_message.startswith("[transient] step 'boom' failed")


async def test_a_human_approval_run_requires_input_then_completes_once_answered(tasks: TaskService) -> None:
    created = await submitted(tasks, CATALOG.get("human-approval"), RAG_INPUT)
    waiting = await status_becomes(tasks, created.record.task_id, TaskStatus.INPUT_REQUIRED)
    request = waiting.input_request
    assert request is not None
    assert (request.key, request.waiting_step) == ("hire-approval", "approval")
    assert request.prompt == "Approve the hire decision?"
    assert request.input_schema == HumanApprovalExecutor.input_schema
    assert "hire-approval" in waiting.status_message

    ignored = await tasks.answer(created.record.task_id, {"never-asked": {"approved": True}}, ACME)
    assert ignored.status is TaskStatus.INPUT_REQUIRED
    await tasks.answer(created.record.task_id, {"hire-approval": {"approved": True, "comment": "ok"}}, ACME)
    done = await status_becomes(tasks, created.record.task_id, TaskStatus.COMPLETED)
    assert done.run is not None and done.run.result["data"]["approved"] is True


async def test_cancelling_a_task_cancels_its_run_and_stays_cancelled(tasks: TaskService) -> None:
    created = await submitted(tasks, CATALOG.get("human-approval"), RAG_INPUT)
    await status_becomes(tasks, created.record.task_id, TaskStatus.INPUT_REQUIRED)
    cancelled = await tasks.cancel(created.record.task_id, ACME)
    assert cancelled.status is TaskStatus.CANCELLED

    async def run_cancelled() -> bool:
        view = (await tasks.get(created.record.task_id, ACME)).run
        return view is not None and view.execution_status == "Cancelled"

    await wait_until(run_cancelled, timeout=30, interval=0.02)
    with pytest.raises(TaskTerminalError) as again:
        await tasks.cancel(created.record.task_id, ACME)
    assert again.value.status is TaskStatus.CANCELLED


async def test_a_terminal_task_cannot_be_cancelled(tasks: TaskService) -> None:
    created = await submitted(tasks, CATALOG.get("rag-final-test"), RAG_INPUT)
    await status_becomes(tasks, created.record.task_id, TaskStatus.COMPLETED)
    with pytest.raises(TaskTerminalError):
        await tasks.cancel(created.record.task_id, ACME)
    assert (await tasks.get(created.record.task_id, ACME)).status is TaskStatus.COMPLETED


async def test_another_tenants_task_answers_exactly_like_an_unknown_one(tasks: TaskService) -> None:
    created = await submitted(tasks, CATALOG.get("human-approval"), RAG_INPUT)
    unknown = "task_" + "0" * 32
    for attempt in (
        lambda task_id: tasks.get(task_id, GLOBEX),
        lambda task_id: tasks.cancel(task_id, GLOBEX),
        lambda task_id: tasks.answer(task_id, {"hire-approval": {"approved": False}}, GLOBEX),
    ):
        with pytest.raises(TaskNotFoundError) as foreign:
            await attempt(created.record.task_id)
        with pytest.raises(TaskNotFoundError) as missing:
            await attempt(unknown)
        assert str(foreign.value).replace(created.record.task_id, "ID") == str(missing.value).replace(
            unknown, "ID"
        )
    assert (await tasks.get(created.record.task_id, ACME)).status is not TaskStatus.CANCELLED
    await tasks.cancel(created.record.task_id, ACME)


async def test_a_task_expires_with_its_ttl(services: RuntimeServices) -> None:
    short = task_service(services, min_ttl_ms=100)
    created = await submitted(short, CATALOG.get("human-approval"), RAG_INPUT)
    expiring = await short.create("submit", created.record.run_id, {}, ACME, requested_ttl_ms=300)
    assert expiring.record.ttl_ms == 300

    async def gone() -> bool:
        return await short.store.load(expiring.record.task_id) is None

    await wait_until(gone, timeout=10, interval=0.02)
    with pytest.raises(TaskNotFoundError):
        await short.get(expiring.record.task_id, ACME)
    assert expiring.record.task_id not in {view.record.task_id for view in (await short.list(ACME)).tasks}
    await short.cancel(created.record.task_id, ACME)  # the run outlives the expired task


async def test_a_requested_ttl_is_clamped_to_the_configured_bounds(services: RuntimeServices) -> None:
    bounded = task_service(services, min_ttl_ms=5_000, max_ttl_ms=60_000, default_ttl_ms=30_000)
    assert bounded.settings.ttl_for(None) == 30_000
    assert bounded.settings.ttl_for(10) == 5_000
    assert bounded.settings.ttl_for(10**9) == 60_000


async def test_listing_pages_through_the_tenants_tasks_newest_first(services: RuntimeServices) -> None:
    listing = task_service(services, page_size=2)
    tenant = ExecutionContextSnapshot(user_id="lia", tenant_id=f"list-{secrets.token_hex(3)}")
    run = await listing.control_plane.submit(
        CATALOG.get("rag-final-test"), RAG_INPUT, SubmitMode.QUEUE_FIRST, tenant
    )
    created = [
        (await listing.create("submit", run.shared_run_id, {}, tenant)).record.task_id for _ in range(3)
    ]
    first = await listing.list(tenant)
    assert first.next_cursor is not None
    second = await listing.list(tenant, first.next_cursor)
    listed = [*first.tasks, *second.tasks]
    assert sorted(view.record.task_id for view in listed) == sorted(created) and second.next_cursor is None
    newest_first = [view.record.created_at_ms for view in listed]
    assert newest_first == sorted(newest_first, reverse=True)
    assert (await listing.list(GLOBEX)).tasks == []
    with pytest.raises(InvalidTaskCursorError):
        await listing.list(tenant, "not-a-cursor")
