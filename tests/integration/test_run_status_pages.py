"""Issue 28.2: `run.status` of a run with many steps answers in pages.

The summary (how many steps, how many in each status, the step that failed the run) covers the
whole run; `steps` holds one page in pipeline order, and `next_steps_cursor` walks every step
exactly once, live and after the run was archived alike (a real runtime: redis-server, SQLite
durable store, one in-process instance, the sweeper driven by hand). The MCP tool takes the
cursor and page size; a cursor the server did not give is an error saying what to pass.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_runtime import Principal
from runtime_core.bootstrap import RuntimeServices
from runtime_core.control_plane import DEFAULT_STEP_PAGE_SIZE, ControlPlane, RunStatusView, StepPage
from runtime_core.errors import InvalidArgumentError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.lifecycle import HotStateRetention
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from tests.integration.control_plane_support import TENANT_A
from tests.integration.lifecycle_support import lifecycle_runtime, run_to_end
from tests.reliability.mcp_rig import error_code, held_session, ok, server_for, tool_backend

WIDTH = 2 * DEFAULT_STEP_PAGE_SIZE + 30  # three default pages, the last one partial
OPERATOR = Principal(name="op", user_id="olga", tenant_id=TENANT_A.tenant_id, roles=("operator",))


def _fan_out(width: int, *, failing: str | None = None) -> PipelineDefinition:
    steps: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.noop"}]
    for i in range(width):
        name = f"b{i:04d}"
        flaky = {"stepKey": "test.flaky", "config": {"failTimes": 9}} if name == failing else {}
        steps.append({"name": name, "stepKey": "test.noop", "dependsOn": ["start"], **flaky})
    return parse_pipeline({"name": "wide", "steps": steps})


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeServices]:
    hot = HotStateRetention(enabled=False, grace_ms=0, record_retention_ms=60_000)
    settings = lifecycle_runtime(
        redis_server.url, tmp_path_factory.mktemp("pages"), hot, background_pump=False
    )
    async with RuntimeServices(settings) as started:
        yield started


@pytest.fixture(scope="module")
def plane(services: RuntimeServices) -> ControlPlane:
    return services.control_plane


async def _walk(plane: ControlPlane, run_id: str, size: int) -> tuple[list[RunStatusView], list[str]]:
    """Every page of the run's steps, following the cursors; the step names in the order seen."""
    views, names, cursor = [], [], None
    while True:
        view = await plane.run_status(run_id, TENANT_A, StepPage.at(cursor, size))
        views.append(view)
        names += [row.name for row in view.steps]
        cursor = view.next_steps_cursor
        if cursor is None:
            return views, names


async def _archive(plane: ControlPlane) -> None:
    sweeper = plane.parts.lifecycle.sweeper
    assert sweeper is not None
    await sweeper.sweep_once()


async def test_the_summary_counts_every_step_and_the_pages_walk_each_step_once_in_order(
    plane: ControlPlane,
) -> None:
    pipeline = _fan_out(WIDTH)
    done = await run_to_end(plane, pipeline, TENANT_A)
    run_id = done.shared_run_id or ""
    every_step = [step.name for step in pipeline.steps]

    first = await plane.run_status(run_id, TENANT_A)
    assert (first.steps_total, first.step_counts) == (WIDTH + 1, {"Completed": WIDTH + 1})
    assert [row.name for row in first.steps] == every_step[:DEFAULT_STEP_PAGE_SIZE]
    assert first.next_steps_cursor is not None

    views, seen = await _walk(plane, run_id, DEFAULT_STEP_PAGE_SIZE)
    assert seen == every_step and len(views) == 3
    assert [len(view.steps) for view in views] == [DEFAULT_STEP_PAGE_SIZE, DEFAULT_STEP_PAGE_SIZE, 31]
    # The counts come with the first page; later pages carry their steps only.
    assert views[0].step_counts == first.step_counts and all(v.step_counts == {} for v in views[1:])

    _, seen_in_sevens = await _walk(plane, run_id, 7)
    assert seen_in_sevens == every_step

    await _archive(plane)
    archived_views, archived_seen = await _walk(plane, run_id, DEFAULT_STEP_PAGE_SIZE)
    assert archived_seen == every_step
    assert [v.steps for v in archived_views] == [v.steps for v in views]
    assert archived_views[0].step_counts == first.step_counts


async def test_a_failed_wide_run_names_its_failed_step_and_error_from_any_page(plane: ControlPlane) -> None:
    failing = f"b{WIDTH - 1:04d}"  # on the last page
    done = await run_to_end(plane, _fan_out(WIDTH, failing=failing), TENANT_A)
    first = await plane.run_status(done.shared_run_id or "", TENANT_A)
    assert first.execution_status == "Failed" and first.failed_step == failing
    assert failing not in {row.name for row in first.steps}
    assert first.failed_step_row is not None and first.failed_step_row.last_error is not None
    assert first.failed_step_row.last_error.code == "transient"
    assert first.step_counts == {"Completed": WIDTH, "Failed": 1}


async def test_the_run_status_tool_pages_and_refuses_a_cursor_it_did_not_give(
    services: RuntimeServices, plane: ControlPlane
) -> None:
    pipeline = _fan_out(WIDTH)
    done = await run_to_end(plane, pipeline, TENANT_A)
    async with held_session(server_for(tool_backend(services), OPERATOR)) as client:
        answer = await ok(client, "run.status", {"run_id": done.shared_run_id, "steps_page_size": 50})
        assert (answer["steps_total"], len(answer["steps"]), answer["next_steps_cursor"]) == (
            WIDTH + 1,
            50,
            "50",
        )
        following = await ok(
            client,
            "run.status",
            {
                "run_id": done.shared_run_id,
                "steps_page_size": 50,
                "steps_cursor": answer["next_steps_cursor"],
            },
        )
        assert [row["name"] for row in following["steps"]] == [s.name for s in pipeline.steps[50:100]]
        refused = await client.call_tool("run.status", {"run_id": done.shared_run_id, "steps_cursor": "x9"})
        assert refused.is_error and error_code(refused) == InvalidArgumentError.code
