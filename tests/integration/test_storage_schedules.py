"""The schedule part of the DurableStore contract, on every backend of the storage contract
(its `backend` fixture: SQLite always, the others when their server is configured)."""

from __future__ import annotations

import json
from datetime import timedelta

from runtime_core.storage import DurableStore, ScheduleFire, ScheduleRecord, UnreadableSchedule
from tests.durable_backends import DurableBackend
from tests.integration.test_storage_contract import FOREIGN, T0, TENANT, backend, store

SECRET = "sk-live-do-not-log-4242"

__all__ = ["backend", "store"]  # the contract's fixtures, used by name below


def _schedule(schedule_id: str = "sched_1", name: str = "nightly", tenant_id: str = TENANT) -> ScheduleRecord:
    return ScheduleRecord(
        schedule_id=schedule_id,
        tenant_id=tenant_id,
        name=name,
        spec={"cron": "0 2 * * *", "timezone": "Europe/Berlin", "overlap": "skip"},
        pipeline={"name": "rag", "steps": []},
        input={"candidateId": "c-1"},
        snapshot={"user_id": "alice", "tenant_id": tenant_id},
        created_at=T0,
        status_changed_at=T0,
    )


async def test_a_schedule_is_stored_once_and_read_back_only_by_its_tenant(store: DurableStore) -> None:
    record = _schedule()
    assert await store.insert_schedule(record)
    assert not await store.insert_schedule(record)  # same id
    assert not await store.insert_schedule(_schedule("sched_2", "nightly"))  # same name, same tenant
    assert await store.insert_schedule(_schedule("sched_3", "nightly", FOREIGN))  # a name per tenant
    assert await store.get_schedule(TENANT, "sched_1") == record
    assert await store.get_schedule(FOREIGN, "sched_1") is None
    assert await store.get_schedule(TENANT, "sched_3") is None


async def test_schedules_list_by_name_per_tenant_and_active_ones_for_the_scheduler(
    store: DurableStore,
) -> None:
    for n, name in enumerate(["b", "c", "a"]):
        assert await store.insert_schedule(_schedule(f"sched_{n}", name))
    assert await store.insert_schedule(_schedule("sched_9", "z", FOREIGN))
    listed = await store.list_schedules(TENANT)
    assert ([r.name for r in listed.records], listed.unreadable, listed.last_name) == (
        ["a", "b", "c"],
        (),
        None,
    )
    page = await store.list_schedules(TENANT, after_name="a", limit=1)
    assert ([r.name for r in page.records], page.last_name) == (["b"], "b")  # a full page: page on
    paused = await store.set_schedule_status(TENANT, "sched_1", "paused", T0 + timedelta(seconds=5))
    assert paused is not None and paused.status == "paused"
    assert paused.status_changed_at == T0 + timedelta(seconds=5)
    active = await store.list_active_schedules()
    assert [r.schedule_id for r in active.records] == ["sched_0", "sched_2", "sched_9"]  # every tenant's
    assert (active.unreadable, active.last_id) == ((), None)  # not a full page: the scan is over
    scan = await store.list_active_schedules(after="sched_0", limit=1)
    assert ([r.schedule_id for r in scan.records], scan.last_id) == (["sched_2"], "sched_2")


async def test_a_stored_schedule_that_does_not_read_is_reported_by_id_without_its_values(
    backend: DurableBackend,
) -> None:
    store = backend.store
    for n in range(3):
        assert await store.insert_schedule(_schedule(f"sched_{n}", f"s{n}"))
    await backend.damage_schedule("sched_0", json.dumps([SECRET]))
    await backend.damage_schedule("sched_1", json.dumps([SECRET]))
    first = await store.list_active_schedules(limit=2)  # a page of nothing but corrupt rows
    assert first.records == () and first.last_id == "sched_1"
    assert [u.schedule_id for u in first.unreadable] == ["sched_0", "sched_1"]
    assert all("input" in u.problem and SECRET not in u.problem for u in first.unreadable)
    rest = await store.list_active_schedules(after=first.last_id, limit=2)  # paging goes on past them
    assert ([r.schedule_id for r in rest.records], rest.last_id) == (["sched_2"], None)


async def test_a_tenants_schedule_that_does_not_read_is_listed_apart_read_as_such_and_deleted_by_id(
    backend: DurableBackend,
) -> None:
    store = backend.store
    for n, name in enumerate(["a", "b", "c"]):
        assert await store.insert_schedule(_schedule(f"sched_{n}", name))
    assert await store.insert_schedule(_schedule("sched_9", "b", FOREIGN))
    await backend.damage_schedule("sched_1", json.dumps([SECRET]))
    listed = await store.list_schedules(TENANT)
    assert [r.name for r in listed.records] == ["a", "c"]  # the others still list
    assert [(u.schedule_id, u.name) for u in listed.unreadable] == [("sched_1", "b")]
    assert "input" in listed.unreadable[0].problem and SECRET not in listed.unreadable[0].problem
    first = await store.list_schedules(TENANT, limit=2)  # a corrupt row counts in the page and its cursor
    assert ([r.name for r in first.records], len(first.unreadable), first.last_name) == (["a"], 1, "b")
    rest = await store.list_schedules(TENANT, after_name=first.last_name, limit=2)
    assert ([r.name for r in rest.records], rest.unreadable, rest.last_name) == (["c"], (), None)
    found = await store.get_schedule(TENANT, "sched_1")
    assert isinstance(found, UnreadableSchedule) and (found.schedule_id, found.name) == ("sched_1", "b")
    assert SECRET not in found.problem
    assert await store.get_schedule(FOREIGN, "sched_1") is None
    assert not await store.delete_schedule(FOREIGN, "sched_1")  # another tenant's id: nothing deleted
    assert await store.delete_schedule(TENANT, "sched_1")
    assert await store.get_schedule(TENANT, "sched_1") is None
    assert [r.name for r in (await store.list_schedules(TENANT)).records] == ["a", "c"]
    assert (await store.list_schedules(TENANT)).unreadable == ()
    assert [r.schedule_id for r in (await store.list_schedules(FOREIGN)).records] == ["sched_9"]


async def test_status_changes_are_tenant_scoped_and_keep_the_first_change_time(store: DurableStore) -> None:
    assert await store.insert_schedule(_schedule())
    assert await store.set_schedule_status(FOREIGN, "sched_1", "paused", T0) is None
    first = await store.set_schedule_status(TENANT, "sched_1", "paused", T0 + timedelta(seconds=1))
    again = await store.set_schedule_status(TENANT, "sched_1", "paused", T0 + timedelta(seconds=9))
    assert first == again  # pausing a paused schedule changes nothing
    assert await store.set_schedule_status(TENANT, "missing", "paused", T0) is None


async def test_a_handled_tick_moves_the_last_fire_forward_only(store: DurableStore) -> None:
    assert await store.insert_schedule(_schedule())
    tick = T0 + timedelta(minutes=1)
    assert await store.record_schedule_fire(
        TENANT, "sched_1", ScheduleFire(tick_at=tick, run_id="srun_1", outcome="fired")
    )
    assert not await store.record_schedule_fire(
        TENANT, "sched_1", ScheduleFire(tick_at=tick, run_id="srun_x", outcome="fired")
    )
    assert not await store.record_schedule_fire(
        TENANT, "sched_1", ScheduleFire(tick_at=T0, run_id="srun_0", outcome="fired")
    )
    assert not await store.record_schedule_fire(
        FOREIGN, "sched_1", ScheduleFire(tick_at=tick + timedelta(minutes=1), outcome="skipped")
    )
    later = tick + timedelta(minutes=2)
    assert await store.record_schedule_fire(TENANT, "sched_1", ScheduleFire(tick_at=later, outcome="skipped"))
    stored = await store.get_schedule(TENANT, "sched_1")
    assert stored is not None
    # The newest tick and its outcome; the newest run a tick made stays.
    assert (stored.last_tick_at, stored.last_run_id, stored.last_outcome) == (later, "srun_1", "skipped")
    assert stored.fire_count == 1  # only the tick that made a run counts


async def test_a_waiting_tick_fired_late_is_recorded_without_moving_the_newest_tick_back(
    store: DurableStore,
) -> None:
    assert await store.insert_schedule(_schedule())
    queued, newer = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    for tick, outcome in ((queued, "queued"), (newer, "skipped_overlap")):
        assert await store.record_schedule_fire(
            TENANT, "sched_1", ScheduleFire(tick_at=tick, outcome=outcome)
        )
    fired_at = T0 + timedelta(minutes=3)
    late = ScheduleFire(tick_at=queued, fired_at=fired_at, run_id="srun_q", outcome="fired", late=True)
    assert await store.record_schedule_fire(TENANT, "sched_1", late)
    stored = await store.get_schedule(TENANT, "sched_1")
    assert stored is not None
    assert (stored.last_tick_at, stored.last_fired_at) == (newer, fired_at)
    assert (stored.last_run_id, stored.last_outcome, stored.fire_count) == ("srun_q", "fired", 1)
    assert not await store.record_schedule_fire(FOREIGN, "sched_1", late)


async def test_a_schedule_is_deleted_only_by_its_tenant(store: DurableStore) -> None:
    assert await store.insert_schedule(_schedule())
    assert not await store.delete_schedule(FOREIGN, "sched_1")
    assert await store.delete_schedule(TENANT, "sched_1")
    assert not await store.delete_schedule(TENANT, "sched_1")
    assert await store.get_schedule(TENANT, "sched_1") is None
    assert await store.insert_schedule(_schedule("sched_2"))  # the name is free again
