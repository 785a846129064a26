"""What a scheduler pass reads, with two control planes' schedulers sharing one Redis and one
durable store: all its Redis reads (server clock, the schedules-changed version, every active
schedule's tick state) in one pipelined round trip, and the durable store only after a
create / pause / resume / delete on any control plane changed the active schedules."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.pipeline import parse_pipeline
from runtime_core.scheduling import ScheduleSpec, Scheduling, SchedulingSettings, build_scheduling
from runtime_core.storage import SqliteDurableStore
from tests.conftest import RedisTarget
from tests.integration.control_plane_support import control_plane
from tests.integration.schedule_support import new_tenant

pytestmark = pytest.mark.redis_kinds("single", "cluster")

NEVER_DUE = ScheduleSpec(cron="0 0 1 1 *")  # once a year: no tick is due while the test runs
NOOP = parse_pipeline({"name": "noop", "steps": [{"name": "only", "stepKey": "test.noop"}]})
TENANT = new_tenant()


@dataclass
class Plane:
    """One control plane's scheduling, with what its scheduler asked of Redis and the store."""

    scheduling: Scheduling
    hot_state: HotState
    store: SqliteDurableStore
    round_trips: int = 0  # single commands and pipelines sent to Redis
    store_scans: int = 0
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def passed(self) -> set[str]:
        """Run one pass from zeroed counters: the active schedules it knows."""
        self.round_trips = self.store_scans = 0
        await self.scheduling.scheduler.run_pass()
        return {record.schedule_id for record in self.scheduling.scheduler.active.records}


def _count_reads(plane: Plane, monkeypatch: pytest.MonkeyPatch) -> None:
    redis, scan = plane.hot_state.redis, plane.store.list_active_schedules
    command, pipeline = redis.execute_command, redis.pipeline

    async def counted_scan(*args: Any, **kwargs: Any) -> Any:
        plane.store_scans += 1
        return await scan(*args, **kwargs)

    async def counted_command(*args: Any, **kwargs: Any) -> Any:
        plane.round_trips += 1
        return await command(*args, **kwargs)

    def counted_pipeline(*args: Any, **kwargs: Any) -> Any:
        made = pipeline(*args, **kwargs)
        execute = made.execute

        async def counted_execute(*args: Any, **kwargs: Any) -> Any:
            plane.round_trips += 1
            return await execute(*args, **kwargs)

        monkeypatch.setattr(made, "execute", counted_execute)
        return made

    monkeypatch.setattr(plane.store, "list_active_schedules", counted_scan)
    monkeypatch.setattr(redis, "execute_command", counted_command)
    monkeypatch.setattr(redis, "pipeline", counted_pipeline)


@pytest.fixture
async def planes(
    redis_target: RedisTarget, hot_state: HotState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[Plane]]:
    submitter = control_plane(hot_state, scale_out_enabled=False)  # nothing is due: never submits
    built: list[Plane] = []
    try:
        for _ in range(2):  # each control plane: its own Redis client and store connection
            own = connect_hot_state(redis_target.url, prefix=hot_state.prefix)
            store = await SqliteDurableStore.open(tmp_path / "runtime.db")
            scheduling = build_scheduling(own, store, submitter, SchedulingSettings(enabled=False))
            built.append(Plane(scheduling, own, store, closers=[own.close, store.close]))
            _count_reads(built[-1], monkeypatch)
        yield built
    finally:
        for plane in built:
            for close in plane.closers:
                await close()
        await submitter.stop()


async def test_a_pass_reads_redis_in_one_round_trip_and_the_store_only_after_a_change(
    planes: list[Plane],
) -> None:
    a, b = planes
    created = [(await a.scheduling.service.create(TENANT, f"s{n}", NOOP, {}, NEVER_DUE)) for n in range(3)]
    ids = {view.schedule_id for view in created}
    assert await b.passed() == ids and b.store_scans == 1  # a changed them: b reads them
    for _ in range(3):  # nothing changed: the clock, the version and 3 tick states, one round trip
        assert await b.passed() == ids
        assert (b.store_scans, b.round_trips) == (0, 1)

    paused = created[0].schedule_id
    await a.scheduling.service.pause(TENANT, paused)  # on the other control plane
    assert await b.passed() == ids - {paused} and b.store_scans == 1
    await a.scheduling.service.resume(TENANT, paused)
    assert await b.passed() == ids and b.store_scans == 1
    await a.scheduling.service.delete(TENANT, paused)
    assert await b.passed() == ids - {paused} and b.store_scans == 1
    assert await a.passed() == ids - {paused} and a.store_scans == 1  # and a reads its own changes
    assert await b.passed() == ids - {paused} and (b.store_scans, b.round_trips) == (0, 1)


async def test_a_lost_version_makes_every_scheduler_read_the_store_again(
    planes: list[Plane], hot_state: HotState
) -> None:
    a, b = planes
    view = await a.scheduling.service.create(TENANT, "kept", NOOP, {}, NEVER_DUE)
    assert await b.passed() == {view.schedule_id}
    await hot_state.redis.delete(b.scheduling.scheduler.active.key)  # as a Redis that lost its dataset
    assert await b.passed() == {view.schedule_id} and b.store_scans == 1
    assert await b.passed() == {view.schedule_id} and b.store_scans == 0
