"""Schedules on a real runtime (test redis-server, SQLite store, background pump): ticks fire
runs that say which schedule and tick made them, each overlap policy, two schedulers racing
for the same ticks, pause / resume / trigger / delete, and tenant isolation."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices
from runtime_core.control_plane import run_final_status, run_is_done
from runtime_core.errors import ConflictError, NotFoundError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.queueing import SharedRunRecord
from runtime_core.scheduling import Scheduler, ScheduleView, SchedulingSettings
from runtime_core.storage import ScheduleRecord, SqliteDurableStore
from tests.durable_backends import sqlite_schedule_damage
from tests.helpers import wait_until
from tests.integration.schedule_support import (
    HoldExecutor,
    create_schedule,
    execution_of,
    new_tenant,
    runs_of,
    scheduled,
    scheduling_runtime,
)

Rig = tuple[RuntimeServices, HoldExecutor]
SECRET = "sk-live-stored-in-a-schedule-7e7e"


@pytest.fixture(scope="module")
async def rig(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Rig]:
    async for opened in scheduling_runtime(redis_server.url, Path(tmp_path_factory.mktemp("schedules"))):
        yield opened


def _attribute(run: SharedRunRecord, name: str) -> str:
    assert run.snapshot is not None
    return run.snapshot.attributes[name]


def _tick(run: SharedRunRecord) -> datetime:
    return datetime.fromisoformat(_attribute(run, "schedule.tick"))


async def _until_runs(services: RuntimeServices, tenant: ExecutionContextSnapshot, count: int) -> None:
    async def enough() -> bool:
        return len(await runs_of(services, tenant)) >= count

    await wait_until(enough, timeout=20, interval=0.05)


async def _until_outcome(
    services: RuntimeServices, tenant: ExecutionContextSnapshot, schedule_id: str, outcome: str
) -> None:
    async def seen() -> bool:
        return (await services.scheduling.service.get(tenant, schedule_id)).last_outcome == outcome

    await wait_until(seen, timeout=20, interval=0.05)


async def _started(services: RuntimeServices, tenant: ExecutionContextSnapshot, run_id: str) -> str:
    found: list[str] = []

    async def has_execution() -> bool:
        execution_id = await execution_of(services, tenant, run_id)
        found.extend([execution_id] if execution_id else [])
        return bool(found)

    await wait_until(has_execution, timeout=20, interval=0.05)
    return found[0]


async def test_each_tick_fires_one_run_that_carries_the_schedule_and_tick_in_snapshot_and_ledger(
    rig: Rig,
) -> None:
    services, hold = rig
    tenant = new_tenant()
    async with scheduled(services, hold, tenant, overlap="allow") as view:
        await _until_runs(services, tenant, 3)
    runs = await runs_of(services, tenant)
    ticks = [_tick(run) for run in runs]
    assert len(set(ticks)) == len(ticks)
    assert all((b - a).total_seconds() == 1 for a, b in pairwise(ticks))
    for run in runs:
        assert run.snapshot is not None and run.snapshot.tenant_id == tenant.tenant_id
        assert run.snapshot.user_id == tenant.user_id
        assert _attribute(run, "schedule.id") == view.schedule_id
        assert _attribute(run, "schedule.trigger") == "scheduled"
    ledger = await services.audit.queries.ledger(tenant, shared_run_id=runs[0].shared_run_id)
    submitted = next(entry for entry in ledger if entry.event == "shared_run.submitted")
    assert submitted.attributes["schedule.id"] == view.schedule_id
    assert submitted.attributes["schedule.tick"] == _attribute(runs[0], "schedule.tick")


async def test_overlap_skip_fires_no_tick_while_the_previous_run_is_active(rig: Rig) -> None:
    services, hold = rig
    tenant = new_tenant()
    async with scheduled(services, hold, tenant, overlap="skip") as view:
        await _until_runs(services, tenant, 1)
        await _until_outcome(services, tenant, view.schedule_id, "skipped_overlap")
        first = (await runs_of(services, tenant))[0]
        assert len(await runs_of(services, tenant)) == 1
        hold.release(await _started(services, tenant, first.shared_run_id))
        await _until_runs(services, tenant, 2)  # once it ended, the next tick fires again


async def test_overlap_cancel_previous_cancels_the_active_run_then_fires(rig: Rig) -> None:
    services, hold = rig
    tenant = new_tenant()
    async with scheduled(services, hold, tenant, overlap="cancel_previous") as view:
        await _until_runs(services, tenant, 2)
        await services.scheduling.service.pause(tenant, view.schedule_id)
        first, second = (await runs_of(services, tenant))[:2]
        # Queued or running when the next tick cancelled it: released, it ends Cancelled either way
        # (a running step finishes; the cancelled run starts nothing new).
        hold.release_tenant(tenant.tenant_id)

        async def first_cancelled() -> bool:
            status = await services.control_plane.run_status(first.shared_run_id, tenant)
            return run_is_done(status) and run_final_status(status) == "Cancelled"

        await wait_until(first_cancelled, timeout=20, interval=0.05)
        assert _tick(second) > _tick(first)


async def test_overlap_queue_one_keeps_one_tick_waiting_and_fires_it_when_the_previous_run_ends(
    rig: Rig,
) -> None:
    services, hold = rig
    tenant = new_tenant()
    async with scheduled(services, hold, tenant, overlap="queue_one") as view:
        await _until_runs(services, tenant, 1)
        await _until_outcome(services, tenant, view.schedule_id, "queued")
        await _until_outcome(services, tenant, view.schedule_id, "skipped_overlap")  # only one waits
        assert len(await runs_of(services, tenant)) == 1
        first = (await runs_of(services, tenant))[0]
        hold.release(await _started(services, tenant, first.shared_run_id))
        await _until_runs(services, tenant, 2)
        runs = await runs_of(services, tenant)
        queued = [run for run in runs if _attribute(run, "schedule.trigger") == "queued"]
        assert len(queued) == 1 and _tick(first) < _tick(queued[0])

        async def recorded() -> bool:  # the durable record counts the late run and names it
            now = await services.scheduling.service.get(tenant, view.schedule_id)
            return (now.fire_count, now.last_run_id) == (2, queued[0].shared_run_id)

        await wait_until(recorded, timeout=20, interval=0.05)


async def test_overlap_allow_starts_a_run_per_tick_while_earlier_ones_are_active(rig: Rig) -> None:
    services, hold = rig
    tenant = new_tenant()
    async with scheduled(services, hold, tenant, overlap="allow"):
        await _until_runs(services, tenant, 3)
        runs = await runs_of(services, tenant)
        statuses = [await services.control_plane.run_status(run.shared_run_id, tenant) for run in runs]
        assert sum(not run_is_done(status) for status in statuses) >= 2  # held: several active at once


async def test_two_schedulers_on_one_redis_fire_each_tick_exactly_once(rig: Rig) -> None:
    services, hold = rig
    first = services.scheduling.scheduler
    second = Scheduler(
        services.hot_state,
        services.durable_store,
        first.ticks,
        first.firer,
        SchedulingSettings(poll_interval_ms=200),
        owner="second-scheduler",
    )
    second.start()
    tenant = new_tenant()
    try:
        async with scheduled(services, hold, tenant, cron="* * * * * *", overlap="allow"):
            await _until_runs(services, tenant, 4)
    finally:
        await second.stop()
    ticks = Counter(_attribute(run, "schedule.tick") for run in await runs_of(services, tenant))
    assert set(ticks.values()) == {1}


async def test_pause_resume_trigger_list_and_delete_touch_only_the_callers_tenant_and_keep_the_priority(
    rig: Rig,
) -> None:
    services, hold = rig
    service = services.scheduling.service
    owner, other = new_tenant("owner"), new_tenant("intruder")
    view = await create_schedule(
        services, owner, "nightly", cron="0 3 * * *", timezone="Europe/Berlin", priority=8
    )
    assert view.next_fire_at is not None
    assert view.next_fire_at.astimezone(view.spec.zone).strftime("%H:%M") == "03:00"
    with pytest.raises(ConflictError):
        await create_schedule(services, owner, "nightly", cron="0 4 * * *")
    for action in (service.get, service.pause, service.resume, service.delete, service.trigger):
        with pytest.raises(NotFoundError):
            await action(other, view.schedule_id)
    assert (await service.list(other)).schedules == []
    paused = await service.pause(owner, view.schedule_id)
    assert paused.status == "paused" and paused.next_fire_at is None
    run_id, _ = await service.trigger(owner, view.schedule_id)
    triggered = await services.control_plane.parts.runs.get(run_id)
    assert triggered is not None and _attribute(triggered, "schedule.trigger") == "manual"
    assert triggered.priority == 8  # the schedule's priority goes with each run it submits
    assert (await service.resume(owner, view.schedule_id)).status == "active"
    listed = await service.list(owner)
    assert ([v.name for v in listed.schedules], listed.unreadable, listed.next_after_name) == (
        ["nightly"],
        [],
        None,
    )
    deleted = await service.delete(owner, view.schedule_id)
    assert isinstance(deleted, ScheduleView) and deleted.status == "deleted"
    with pytest.raises(NotFoundError):
        await service.get(owner, view.schedule_id)
    hold.release_tenant(owner.tenant_id)


async def test_a_schedule_whose_stored_spec_is_broken_never_stops_the_others_nor_logs_its_values(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    services, hold = rig
    tenant = new_tenant()
    broken = ScheduleRecord(
        schedule_id="sched_broken_" + tenant.tenant_id,
        tenant_id=tenant.tenant_id,
        name="broken",
        spec={"cron": "* * * * *", "timezone": SECRET},  # no such zone: the spec does not parse
        pipeline={"name": "held"},
        snapshot=tenant.model_dump(mode="json"),
    )
    assert await services.durable_store.insert_schedule(broken)
    caplog.set_level(logging.INFO, logger="runtime_core")

    def failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == "scheduler.schedule_failed"]

    async def reported() -> bool:
        return any(getattr(r, "schedule_id", None) == broken.schedule_id for r in failures())

    try:
        async with scheduled(services, hold, tenant, overlap="allow"):
            await _until_runs(services, tenant, 2)
            await wait_until(reported, timeout=20, interval=0.05)
        assert services.scheduling.scheduler.alive
    finally:
        await services.durable_store.delete_schedule(tenant.tenant_id, broken.schedule_id)
    assert "timezone" in next(r for r in failures() if r.schedule_id == broken.schedule_id).error  # type: ignore[attr-defined]
    assert all(SECRET not in f"{r.getMessage()} {r.__dict__}" for r in caplog.records)


async def test_a_stored_schedule_row_that_does_not_read_is_skipped_and_logged_by_id_without_its_values(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    services, hold = rig
    tenant = new_tenant()
    store = services.durable_store
    assert isinstance(store, SqliteDurableStore)
    corrupt = await create_schedule(services, tenant, "corrupt", cron="0 0 1 1 *")
    await sqlite_schedule_damage(store.path)(corrupt.schedule_id, json.dumps([SECRET]))
    caplog.set_level(logging.INFO, logger="runtime_core")

    async def reported() -> bool:
        return any(getattr(r, "schedule_id", None) == corrupt.schedule_id for r in _unreadable(caplog))

    try:
        async with scheduled(services, hold, tenant, overlap="allow"):
            await _until_runs(services, tenant, 2)
            await wait_until(reported, timeout=20, interval=0.05)
        assert services.scheduling.scheduler.alive
    finally:
        await store.delete_schedule(tenant.tenant_id, corrupt.schedule_id)
    assert all(SECRET not in f"{r.getMessage()} {r.__dict__}" for r in caplog.records)


def _unreadable(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "scheduler.schedule_unreadable"]
