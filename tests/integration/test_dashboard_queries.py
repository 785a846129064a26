"""The runtime_core queries behind the dashboard and the MCP Apps view, on a real runtime (real
Redis): the caller tenant's queue depth, the pipeline a run executes (hot, then from its terminal
snapshot), always tenant-checked like `run.status`."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from mcp_runtime import DEFAULT_PIPELINES_DIR
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings, run_is_done
from runtime_core.errors import NotFoundError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineCatalog
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until

CATALOG = PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR)


def _caller(tenant: str) -> ExecutionContextSnapshot:
    return ExecutionContextSnapshot(
        context_key=f"t:{tenant}", project="", user_id="u", tenant_id=tenant, roles=()
    )


ACME, GLOBEX, INITECH = _caller("acme"), _caller("globex"), _caller("initech")


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeServices]:
    settings = RuntimeSettings(
        redis_url=redis_server.url,
        redis_prefix=f"uiq{secrets.token_hex(4)}:",
        data_dir=tmp_path_factory.mktemp("dashboard-queries"),
        control_plane=ControlPlaneSettings(background_pump=False),
    )
    async with RuntimeServices(settings) as started:
        yield started


async def test_queue_depth_counts_only_the_callers_tenants_pending_runs(services: RuntimeServices) -> None:
    plane = services.control_plane
    runs = [
        (await plane.submit(CATALOG.get("flaky-retry"), {}, SubmitMode.QUEUE_FIRST, caller)).shared_run_id
        for caller in (ACME, ACME, GLOBEX)
    ]
    depths = [await plane.queue_depth(caller) for caller in (ACME, GLOBEX, INITECH)]
    await plane.cancel(runs[0], ACME)
    after = [await plane.queue_depth(caller) for caller in (ACME, GLOBEX)]
    for run_id, caller in zip(runs[1:], (ACME, GLOBEX), strict=True):
        await plane.cancel(run_id, caller)
    assert depths == [2, 1, 0]
    assert after == [1, 1]  # a cancelled run leaves the queue


async def test_run_pipeline_answers_for_the_owner_and_like_an_unknown_run_for_others(
    services: RuntimeServices,
) -> None:
    plane = services.control_plane
    submitted = await plane.submit(CATALOG.get("human-approval"), {}, SubmitMode.QUEUE_FIRST, ACME)
    queued = await plane.run_pipeline(submitted.shared_run_id, ACME)
    with pytest.raises(NotFoundError) as foreign:
        await plane.run_pipeline(submitted.shared_run_id, GLOBEX)
    with pytest.raises(NotFoundError) as unknown:
        await plane.run_pipeline("srun_" + "0" * 24, GLOBEX)
    assert queued is not None and [s.name for s in queued.steps] == ["candidate", "job", "score", "approval"]
    assert foreign.value.message.replace(submitted.shared_run_id, "<id>") == unknown.value.message.replace(
        "srun_" + "0" * 24, "<id>"
    )
    await plane.cancel(submitted.shared_run_id, ACME)


async def test_a_finished_runs_pipeline_is_read_back_from_its_terminal_snapshot(
    services: RuntimeServices,
) -> None:
    plane = services.control_plane
    submitted = await plane.submit(CATALOG.get("flaky-retry"), {}, SubmitMode.DIRECT_DISPATCH, ACME)

    async def done() -> bool:
        return run_is_done(await plane.run_status(submitted.shared_run_id, ACME))

    await wait_until(done, timeout=30, interval=0.05)
    view = await plane.run_status(submitted.shared_run_id, ACME)
    assert view.execution_id is not None
    by_execution = await plane.run_pipeline(view.execution_id, ACME)
    archived = await services.audit.queries.terminal_pipeline(ACME, view.execution_id)
    assert by_execution is not None and archived is not None
    assert archived.name == by_execution.name == "flaky-retry"
    assert [s.name for s in archived.steps] == ["flaky", "after"]
    assert await services.audit.queries.terminal_pipeline(GLOBEX, view.execution_id) is None
