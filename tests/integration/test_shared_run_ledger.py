"""The ledger of one shared run reads submitted -> queued -> dispatched -> execution events."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.errors import ConflictError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until

ONE_STEP = parse_pipeline({"name": "one", "steps": [{"name": "only", "stepKey": "test.noop"}]})
ALICE = ExecutionContextSnapshot(user_id="alice", tenant_id="tenant-x")
BOB = ExecutionContextSnapshot(user_id="bob", tenant_id="tenant-y")


@pytest.fixture
async def services(redis_server: EmbeddedRedis, tmp_path: Path) -> AsyncIterator[RuntimeServices]:
    settings = RuntimeSettings(
        redis_url=redis_server.url,
        redis_prefix=f"led{secrets.token_hex(3)}:",
        data_dir=tmp_path,
        control_plane=ControlPlaneSettings(background_pump=False, heartbeat_interval_ms=200),
    )
    async with RuntimeServices(settings) as started:
        yield started


async def test_shared_run_ledger_records_submit_queue_dispatch_and_execution(
    services: RuntimeServices,
) -> None:
    plane = services.control_plane
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ALICE)
    await plane.drain(5, ALICE)

    async def completed() -> bool:  # the local run finishes after the engine emitted finalization
        return (await plane.run_status(submitted.shared_run_id, ALICE)).local_status == "Completed"

    await wait_until(completed, timeout=10)
    entries = await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
    events = [entry.event for entry in entries]
    # The execution may start before the dispatch is recorded: the run is marked Dispatched
    # only after the provider accepted it, and the instance starts it at once.
    assert events[:2] == ["shared_run.submitted", "shared_run.queued"]
    assert {"shared_run.dispatched", "execution.created", "step.completed", "execution.finalized"} <= set(
        events
    )
    assert {entry.tenant_id for entry in entries} == {"tenant-x"}
    dispatched = next(entry for entry in entries if entry.event == "shared_run.dispatched")
    assert dispatched.local_run_id and dispatched.assigned_runtime_instance_id
    assert dispatched.runtime_instance_id != dispatched.assigned_runtime_instance_id  # pump is not the target
    execution_entries = [entry for entry in entries if entry.execution_id]
    assert execution_entries
    assert {entry.assigned_runtime_instance_id for entry in execution_entries} == {
        dispatched.assigned_runtime_instance_id
    }
    assert await services.audit.queries.ledger(BOB, shared_run_id=submitted.shared_run_id) == []


async def test_cancelled_shared_run_is_in_the_ledger(services: RuntimeServices) -> None:
    plane = services.control_plane
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ALICE)
    await plane.cancel(submitted.shared_run_id, ALICE)
    with pytest.raises(ConflictError):
        await plane.cancel(submitted.shared_run_id, ALICE)
    events = [
        e.event for e in await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
    ]
    assert events == ["shared_run.submitted", "shared_run.queued", "shared_run.cancelled"]
