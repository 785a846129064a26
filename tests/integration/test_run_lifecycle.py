"""Issue 13.6: a finished run's hot state leaves Redis, and every reader keeps answering for it.

A real runtime (real redis-server, SQLite durable store, one in-process runtime instance)
whose sweeper is driven by hand (`sweep_once`, grace 0) so each test sees exactly one
archiving step; the grace itself is checked with a second sweeper whose grace is long.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime_core.bootstrap import RuntimeServices
from runtime_core.control_plane import ControlPlane
from runtime_core.dag import DropOutcome
from runtime_core.errors import ConflictError, NotFoundError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.lifecycle import (
    ArchiveOutcome,
    HotStateRetention,
    HotStateSweeper,
    Lifecycle,
    RunArchiver,
    RunListQuery,
)
from runtime_core.pipeline import parse_pipeline
from runtime_core.providers import (
    LOCAL_PROVIDER_NAME,
    DispatchRequest,
    DispatchResponse,
    LocalRuntimeProvider,
    ProviderError,
)
from runtime_core.queueing import RetireOutcome, SharedQueueKeys
from runtime_core.storage import RunRecordQuery
from tests.helpers import wait_until
from tests.integration.control_plane_support import GATED, ONE_STEP, TENANT_A, TENANT_B, GateExecutor
from tests.integration.lifecycle_support import (
    comparable,
    existing_keys,
    finish,
    lifecycle_runtime,
    run_to_end,
    submit_queued,
)
from tests.redis_cluster import RedisClusterServer

RETENTION_MS = 400
TWO_STEPS = parse_pipeline(
    {
        "name": "two",
        "steps": [
            {"name": "first", "stepKey": "test.noop"},
            {"name": "second", "stepKey": "test.noop", "dependsOn": ["first"]},
        ],
    }
)
GATE = GateExecutor()


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeServices]:
    hot = HotStateRetention(enabled=False, grace_ms=0, record_retention_ms=RETENTION_MS)
    settings = lifecycle_runtime(
        redis_server.url, tmp_path_factory.mktemp("lifecycle"), hot, background_pump=False
    )
    async with RuntimeServices(settings) as started:
        started.executors.register(GATE)
        yield started


@pytest.fixture(scope="module")
def plane(services: RuntimeServices) -> ControlPlane:
    return services.control_plane


@pytest.fixture(scope="module")
def lifecycle(plane: ControlPlane) -> Lifecycle:
    return plane.parts.lifecycle


async def sweep(lifecycle: Lifecycle) -> dict[str, int]:
    assert lifecycle.sweeper is not None
    return dict(await lifecycle.sweeper.sweep_once())


def execution_keys(plane: ControlPlane, execution_id: str) -> list[str]:
    return plane.parts.dag_store.keys(execution_id).all()


async def members(plane: ControlPlane, shared_run_id: str, local_run_id: str, tenant_id: str) -> list[str]:
    """The live structures that still name the run (each must be empty once it is archived)."""
    redis, k = plane.parts.hot_state.redis, SharedQueueKeys(plane.parts.hot_state)
    index = plane.parts.index
    found = []
    if await redis.hexists(k.of_run(shared_run_id).items, shared_run_id):
        found.append("queue item")
    if await redis.zscore(k.of_run(shared_run_id).tenant_runs(tenant_id), shared_run_id) is not None:
        found.append("tenant run list")
    if await redis.zscore(index.hot_state.key("runindex", "tenant", tenant_id), local_run_id) is not None:
        found.append("tenant run index")
    if await redis.zscore(index.ended_key, local_run_id) is not None:
        found.append("ended local runs")
    return found


# Retiring the hot state


async def test_a_finished_run_leaves_no_execution_keys_and_no_listing_membership(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    view = await run_to_end(plane, TWO_STEPS, TENANT_A)
    assert view.shared_run_id and view.local_run_id and view.execution_id
    hot_state = plane.parts.hot_state
    assert await existing_keys(hot_state, execution_keys(plane, view.execution_id))
    assert await members(plane, view.shared_run_id, view.local_run_id, TENANT_A.tenant_id)

    assert (await sweep(lifecycle)).get(ArchiveOutcome.ARCHIVED.value, 0) >= 1

    assert await existing_keys(hot_state, execution_keys(plane, view.execution_id)) == []
    assert await members(plane, view.shared_run_id, view.local_run_id, TENANT_A.tenant_id) == []


async def test_the_records_of_an_archived_run_expire_after_the_retention(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    view = await run_to_end(plane, ONE_STEP, TENANT_A)
    await sweep(lifecycle)
    index, runs, redis = plane.parts.index, plane.parts.runs, plane.parts.hot_state.redis
    records = [
        runs.keys.run(view.shared_run_id or ""),
        index.hot_state.key("runindex", "local", view.local_run_id or ""),
        index.hot_state.key("runindex", "shared", view.shared_run_id or ""),
        index.hot_state.key("runindex", "execution", view.execution_id or ""),
        index.hot_state.key("runindex", "attempts", view.shared_run_id or ""),
    ]
    ttls = [await redis.pttl(key) for key in records]
    assert all(0 < ttl <= RETENTION_MS for ttl in ttls), ttls

    async def expired() -> bool:
        return await existing_keys(plane.parts.hot_state, records) == []

    await wait_until(expired, timeout=10, interval=0.05)


async def test_nothing_is_retired_before_the_grace_passed(
    plane: ControlPlane, lifecycle: Lifecycle, services: RuntimeServices
) -> None:
    view = await run_to_end(plane, ONE_STEP, TENANT_A)
    assert lifecycle.archiver is not None and view.execution_id
    patient = HotStateSweeper(
        lifecycle.archiver,
        lifecycle.schedule,
        plane.parts.index,
        HotStateRetention(grace_ms=3_600_000, record_retention_ms=RETENTION_MS),
    )
    assert dict(await patient.sweep_once()) == {}
    assert len(await existing_keys(plane.parts.hot_state, execution_keys(plane, view.execution_id))) > 0
    await sweep(lifecycle)  # leave nothing behind for the other tests' counts


async def test_a_run_cancelled_before_dispatch_is_archived_too(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    shared_run_id = await submit_queued(plane, ONE_STEP, TENANT_B)
    await plane.cancel(shared_run_id, TENANT_B)
    before = await plane.run_status(shared_run_id, TENANT_B)

    await sweep(lifecycle)

    redis, k = plane.parts.hot_state.redis, SharedQueueKeys(plane.parts.hot_state).of_run(shared_run_id)
    assert not await redis.hexists(k.items, shared_run_id)
    assert await redis.zscore(k.ended, shared_run_id) is None
    assert await redis.zscore(k.tenant_runs(TENANT_B.tenant_id), shared_run_id) is None
    after = await plane.run_status(shared_run_id, TENANT_B)
    assert (after.shared_status, after.queue_status, after.failure_reason) == (
        "Cancelled",
        "Cancelled",
        before.failure_reason,
    )
    assert comparable(after) == comparable(before)


# Readers answer from the durable record


async def test_run_status_answers_the_same_for_every_id_after_cleanup_and_after_expiry(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    before = await run_to_end(plane, TWO_STEPS, TENANT_A)
    ids = [before.shared_run_id, before.local_run_id, before.execution_id]
    assert all(ids) and before.result is not None and len(before.steps) == 2

    await sweep(lifecycle)
    archived = [await plane.run_status(run_id or "", TENANT_A) for run_id in ids]

    async def hot_records_expired() -> bool:
        return await plane.parts.runs.get(before.shared_run_id or "") is None

    await wait_until(hot_records_expired, timeout=10, interval=0.05)
    expired = [await plane.run_status(run_id or "", TENANT_A) for run_id in ids]
    assert [comparable(v) for v in archived + expired] == [comparable(before)] * 6


async def test_a_failed_run_explains_itself_the_same_after_cleanup(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    retry = {"maxRetries": 2, "strategy": "Fixed", "baseDelayMs": 10, "maxDelayMs": 10}
    failing = parse_pipeline(
        {
            "name": "failing",
            "steps": [
                {"name": "recovered", "stepKey": "test.flaky", "config": {"failTimes": 1, "retry": retry}},
                {"name": "boom", "stepKey": "test.flaky", "config": {"failTimes": 9}},
            ],
        }
    )
    before = await run_to_end(plane, failing, TENANT_A)

    await sweep(lifecycle)
    archived = await plane.run_status(before.shared_run_id or "", TENANT_A)

    assert archived.execution_status == "Failed" and archived.failed_step == "boom"
    assert archived.failure_reason == (
        "step 'boom' (test.flaky) failed: [transient] test.flaky step 'boom' fails attempt 0 of the first 9"
    )
    rows = {row.name: row for row in archived.steps}
    assert rows["recovered"].last_error is not None and rows["recovered"].last_error.at is not None
    assert comparable(archived) == comparable(before)


async def test_a_foreign_tenant_gets_the_unknown_id_answer_for_an_archived_run(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    view = await run_to_end(plane, ONE_STEP, TENANT_A)
    await sweep(lifecycle)
    for run_id in (view.shared_run_id, view.local_run_id, view.execution_id):
        assert run_id is not None
        unknown = run_id[:-4] + "0000"
        with pytest.raises(NotFoundError) as foreign:
            await plane.run_status(run_id, TENANT_B)
        with pytest.raises(NotFoundError) as absent:
            await plane.run_status(unknown, TENANT_B)
        assert foreign.value.message.replace(run_id, "<id>") == absent.value.message.replace(unknown, "<id>")


async def test_cancelling_an_archived_run_is_a_conflict_naming_its_outcome(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    view = await run_to_end(plane, ONE_STEP, TENANT_A)
    await sweep(lifecycle)
    with pytest.raises(ConflictError) as refused:
        await plane.cancel(view.shared_run_id or "", TENANT_A)
    assert "already Completed" in refused.value.message


async def test_the_run_record_carries_ids_statuses_submitter_steps_and_result(
    plane: ControlPlane, lifecycle: Lifecycle, services: RuntimeServices
) -> None:
    view = await run_to_end(plane, TWO_STEPS, TENANT_A)
    await sweep(lifecycle)
    store = services.durable_store
    record = await store.find_run_record(TENANT_A.tenant_id, shared_run_id=view.shared_run_id)
    assert record is not None
    assert (record.local_run_id, record.execution_id) == (view.local_run_id, view.execution_id)
    assert (record.pipeline_name, record.submitted_by, record.status) == ("two", "alice", "Completed")
    assert [s.name for s in record.steps] == ["first", "second"]
    assert set(record.result) == {"second"}
    assert record.created_at <= record.ended_at <= record.archived_at
    assert record.snapshot["tenant_id"] == TENANT_A.tenant_id


# The guards: nothing of a run still going on is ever retired


async def test_a_running_execution_is_never_dropped(plane: ControlPlane, lifecycle: Lifecycle) -> None:
    shared_run_id = await submit_queued(plane, GATED, TENANT_A)

    async def running() -> bool:
        await plane.drain(10, TENANT_A)
        return GATE.started > 0

    await wait_until(running, timeout=20, interval=0.02)
    view = await plane.run_status(shared_run_id, TENANT_A)
    assert view.execution_id is not None
    assert await plane.parts.dag_store.drop_finished(view.execution_id) is DropOutcome.STILL_RUNNING
    await sweep(lifecycle)
    assert await plane.parts.dag_store.execution_status(view.execution_id) == "Running"
    shared = await plane.parts.runs.get(shared_run_id)
    assert shared is not None and shared.archived_at_ms is None
    GATE.release()
    finished = await finish(plane, shared_run_id, TENANT_A)
    assert finished.execution_status == "Completed"
    await sweep(lifecycle)


async def test_a_run_is_not_retired_for_a_local_run_it_no_longer_belongs_to(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    view = await run_to_end(plane, ONE_STEP, TENANT_A)
    retire = plane.parts.runs.retire
    assert await retire(view.shared_run_id or "", TENANT_A.tenant_id, "lrun_another", 1) is (
        RetireOutcome.NOT_FINISHED
    )
    assert await retire(view.shared_run_id or "", TENANT_A.tenant_id, None, 1) is RetireOutcome.NOT_FINISHED
    assert (await plane.parts.runs.get(view.shared_run_id or "")) is not None
    await sweep(lifecycle)
    assert await retire(view.shared_run_id or "", TENANT_A.tenant_id, view.local_run_id, 1) is (
        RetireOutcome.ALREADY_RETIRED
    )


class TwoAtOnce:
    """The archiver, archiving nothing until two runs are being archived at once."""

    def __init__(self, archiver: RunArchiver) -> None:
        self.archiver = archiver
        self.entered = 0
        self.both = asyncio.Event()

    async def archive_local_end(self, local_run_id: str) -> ArchiveOutcome:
        self.entered += 1
        if self.entered == 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), timeout=10)
        return await self.archiver.archive_local_end(local_run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archiver, name)


async def test_a_sweep_archives_several_finished_runs_at_once(
    plane: ControlPlane, lifecycle: Lifecycle
) -> None:
    """Each archiving waits on Redis and the durable store: one at a time, a slow link made the
    sweeper fall behind the runs that finish."""
    for _ in range(2):
        await run_to_end(plane, ONE_STEP, TENANT_A)
    sweeper = lifecycle.sweeper
    assert sweeper is not None
    archiver = sweeper.archiver
    sweeper.archiver = TwoAtOnce(archiver)  # type: ignore[assignment]
    try:
        outcomes = await sweep(lifecycle)
    finally:
        sweeper.archiver = archiver
    assert outcomes.get(ArchiveOutcome.ARCHIVED.value, 0) >= 2


class ReplyLostAfterTheRunEnded(LocalRuntimeProvider):
    """The local provider: the instance accepts the run and runs it to its end, the archiver
    looks at the ended run, and only then is the dispatch reply lost (a partition between the
    control plane and the instance: the dispatcher settles the attempt after its timeout)."""

    def __init__(self, plane: ControlPlane, archiver: RunArchiver) -> None:
        super().__init__(plane.parts.pool)
        self.index = plane.parts.index
        self.archiver = archiver
        self.outcomes: list[ArchiveOutcome] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        accepted = await super().dispatch(request)

        async def ended() -> bool:
            record = await self.index.get_local(accepted.local_run_id)
            return record is not None and record.status.is_terminal

        await wait_until(ended, timeout=20, interval=0.02)
        self.outcomes.append(await self.archiver.archive_local_end(accepted.local_run_id))
        raise ProviderError("injected: the dispatch reply was lost after the run ended")


async def test_a_run_that_ended_before_its_lost_reply_was_settled_is_archived_once_recorded(
    plane: ControlPlane, lifecycle: Lifecycle, services: RuntimeServices
) -> None:
    assert lifecycle.archiver is not None
    provider = ReplyLostAfterTheRunEnded(plane, lifecycle.archiver)
    local = plane.parts.providers.by_name(LOCAL_PROVIDER_NAME)
    plane.parts.providers.add(provider)
    try:
        shared_run_id = await submit_queued(plane, ONE_STEP, TENANT_A)
        drained = await plane.drain(1, TENANT_A)
    finally:
        plane.parts.providers.add(local)
    assert drained.dispatched == 1
    assert provider.outcomes == [ArchiveOutcome.WAITING]  # not retired as an attempt moved on from
    view = await plane.run_status(shared_run_id, TENANT_A)
    assert view.shared_status == "Dispatched" and view.local_run_id is not None
    archiver, local_run_id = lifecycle.archiver, view.local_run_id

    async def archived() -> bool:  # once its ledger and trace are durable
        return await archiver.archive_local_end(local_run_id) is ArchiveOutcome.ARCHIVED

    await wait_until(archived, timeout=20, interval=0.05)
    record = await services.durable_store.find_run_record(TENANT_A.tenant_id, shared_run_id=shared_run_id)
    assert record is not None and record.status == "Completed"


# Replay of an archived execution


async def test_replay_restores_an_archived_execution_and_the_sweeper_drops_it_again(
    plane: ControlPlane, lifecycle: Lifecycle, services: RuntimeServices
) -> None:
    view = await run_to_end(plane, ONE_STEP, TENANT_A)
    await sweep(lifecycle)
    execution_id = view.execution_id or ""
    replayed = await services.audit.replay.replay(execution_id, TENANT_A)
    assert (replayed.restored, replayed.status) == (True, "Completed")
    assert await plane.parts.dag_store.execution_status(execution_id) == "Completed"

    await sweep(lifecycle)

    assert await existing_keys(plane.parts.hot_state, execution_keys(plane, execution_id)) == []
    assert comparable(await plane.run_status(execution_id, TENANT_A)) == comparable(view)


# Several runs, and a sweeper that starts by itself


async def test_many_finished_runs_are_archived_by_one_sweep_in_batches(
    plane: ControlPlane, lifecycle: Lifecycle, services: RuntimeServices
) -> None:
    shared_run_ids = [await submit_queued(plane, ONE_STEP, TENANT_B) for _ in range(12)]
    await asyncio.gather(*(finish(plane, run_id, TENANT_B) for run_id in shared_run_ids))
    assert lifecycle.sweeper is not None
    small_batches = HotStateSweeper(
        lifecycle.sweeper.archiver,
        lifecycle.schedule,
        plane.parts.index,
        HotStateRetention(grace_ms=0, record_retention_ms=RETENTION_MS, sweep_batch=5),
    )
    outcomes = await small_batches.sweep_once()
    assert outcomes[ArchiveOutcome.ARCHIVED.value] >= 12
    records = await services.durable_store.list_run_records(TENANT_B.tenant_id, RunRecordQuery(limit=1000))
    assert set(shared_run_ids) <= {record.shared_run_id for record in records}


async def test_the_background_sweeper_archives_runs_after_the_grace(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> None:
    hot = HotStateRetention(grace_ms=200, record_retention_ms=RETENTION_MS, sweep_interval_ms=50)
    settings = lifecycle_runtime(redis_server.url, tmp_path_factory.mktemp("sweeping"), hot)
    async with RuntimeServices(settings) as started:
        plane = started.control_plane
        view = await run_to_end(plane, ONE_STEP, TENANT_A)

        async def archived() -> bool:
            return await started.durable_store.find_run_record(
                TENANT_A.tenant_id, shared_run_id=view.shared_run_id
            ) is not None and not await existing_keys(
                plane.parts.hot_state, execution_keys(plane, view.execution_id or "")
            )

        await wait_until(archived, timeout=15, interval=0.05)
        answered: Any = await plane.run_status(view.shared_run_id or "", TENANT_A)
        assert comparable(answered) == comparable(view)


async def test_archiving_and_listing_work_on_a_redis_cluster(
    redis_cluster: RedisClusterServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every lifecycle script stays in one slot; the index and listing reads span slots."""
    hot = HotStateRetention(enabled=False, grace_ms=0, record_retention_ms=RETENTION_MS)
    settings = lifecycle_runtime(
        redis_cluster.url, tmp_path_factory.mktemp("cluster-lifecycle"), hot, background_pump=False
    )
    async with RuntimeServices(settings) as started:
        plane = started.control_plane
        before = await run_to_end(plane, TWO_STEPS, TENANT_A)
        hot_listing = await plane.list_runs(RunListQuery(), TENANT_A)
        # A run that ended before dispatch sits in its own queue partition's `ended` set.
        cancelled = await submit_queued(plane, ONE_STEP, TENANT_B)
        keys = plane.parts.queue.keys
        assert keys.of_run(cancelled).index not in (0, keys.of_run(before.shared_run_id or "").index)
        await plane.cancel(cancelled, TENANT_B)
        assert await sweep(plane.parts.lifecycle) == {ArchiveOutcome.ARCHIVED.value: 2}
        assert await plane.parts.queue.item(cancelled) is None  # retired from its partition
        assert (
            await existing_keys(plane.parts.hot_state, execution_keys(plane, before.execution_id or "")) == []
        )
        assert comparable(await plane.run_status(before.shared_run_id or "", TENANT_A)) == comparable(before)
        archived_listing = await plane.list_runs(RunListQuery(), TENANT_A)
    assert [(r.shared_run_id, r.archived) for r in hot_listing.runs] == [(before.shared_run_id, False)]
    assert [(r.shared_run_id, r.archived) for r in archived_listing.runs] == [(before.shared_run_id, True)]
