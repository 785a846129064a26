"""Issue 30.5 on a real runtime (test redis-server, SQLite store, background pump): failed runs
explained (`runs.failed`), retried in bulk as linked runs (`runs.retry`, idempotent), cancelled
in bulk by filter only within the caller's tenant (`runs.cancel`), refused above the limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices
from runtime_core.bulk_actions import (
    RETRIED_EVENT,
    RETRY_OF_ATTRIBUTE,
    ActionOutcome,
    BulkRunActions,
    BulkSettings,
    RunFilter,
    TooManyRunsError,
)
from runtime_core.control_plane import run_final_status, run_is_done
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import RunListQuery
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until
from tests.integration.schedule_support import HELD, HoldExecutor, new_tenant, scheduling_runtime

Rig = tuple[RuntimeServices, HoldExecutor]
FAILING = parse_pipeline(
    {
        "name": "always-fails",
        "steps": [
            {
                "name": "flaky",
                "stepKey": "test.flaky",
                "config": {"failTimes": 1000, "retry": {"maxRetries": 1, "baseDelayMs": 1, "jitter": False}},
            }
        ],
    }
)
RUNS = 20


@pytest.fixture(scope="module")
async def rig(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Rig]:
    async for opened in scheduling_runtime(redis_server.url, Path(tmp_path_factory.mktemp("bulk"))):
        yield opened


def _bulk(services: RuntimeServices, limit: int = 100) -> BulkRunActions:
    return BulkRunActions(
        services.control_plane,
        services.audit.queries,
        services.audit.ledger,
        BulkSettings(max_runs_per_call=limit),
    )


async def _submit(
    services: RuntimeServices, tenant: ExecutionContextSnapshot, pipeline: object, n: int
) -> list[str]:
    plane = services.control_plane
    return [
        (await plane.submit(pipeline, {"n": i}, SubmitMode.QUEUE_FIRST, tenant)).shared_run_id  # type: ignore[arg-type]
        for i in range(n)
    ]


async def _until_done(
    services: RuntimeServices, tenant: ExecutionContextSnapshot, run_ids: list[str]
) -> None:
    async def all_done() -> bool:
        views = [await services.control_plane.run_status(run_id, tenant) for run_id in run_ids]
        return all(run_is_done(view) for view in views)

    await wait_until(all_done, timeout=60, interval=0.1)


async def test_bulk_retry_of_twenty_failed_runs_creates_twenty_runs_linked_in_both_ledgers(rig: Rig) -> None:
    services, _ = rig
    tenant = new_tenant("retrier")
    originals = await _submit(services, tenant, FAILING, RUNS)
    await _until_done(services, tenant, originals)
    bulk = _bulk(services)

    failed, _ = await bulk.failed.list(tenant, RunFilter(pipeline="always-fails"), limit=50)
    assert sorted(run.shared_run_id for run in failed) == sorted(originals)
    sample = failed[0]
    assert sample.failed_step == "flaky" and sample.last_error is not None
    assert sample.last_error.code == "transient" and sample.retry_count == 1
    assert [a.retry_scheduled for a in sample.attempts] == [True, False]  # one retry, then failed for good
    assert sample.retried_by is None

    with pytest.raises(TooManyRunsError):
        await _bulk(services, limit=RUNS - 1).retry(tenant, RunFilter(pipeline="always-fails"))
    listed = await services.control_plane.list_runs(RunListQuery(limit=200), tenant)
    assert len(listed.runs) == RUNS  # the refused call made nothing

    retried = await bulk.retry(tenant, RunFilter(pipeline="always-fails"))
    assert sorted(r.shared_run_id for r in retried) == sorted(originals)
    assert {r.outcome for r in retried} == {ActionOutcome.RETRIED}
    new_runs = {r.shared_run_id: r.new_run_id for r in retried}
    assert len(set(new_runs.values())) == RUNS and not set(new_runs.values()) & set(originals)
    for original, new_run_id in new_runs.items():
        assert new_run_id is not None
        record = await services.control_plane.parts.runs.get(new_run_id)
        assert record is not None and record.snapshot is not None
        assert record.snapshot.attributes == {RETRY_OF_ATTRIBUTE: original}
        assert record.pipeline == FAILING and record.tenant_id == tenant.tenant_id
        new_ledger = await services.audit.queries.ledger(tenant, shared_run_id=new_run_id)
        submitted = next(e for e in new_ledger if e.event == "shared_run.submitted")
        assert submitted.attributes[RETRY_OF_ATTRIBUTE] == original
        old_ledger = await services.audit.queries.ledger(tenant, shared_run_id=original)
        assert [e.attributes["retry.run_id"] for e in old_ledger if e.event == RETRIED_EVENT] == [new_run_id]

    again = await bulk.retry(tenant, RunFilter(run_ids=tuple(originals)))
    assert {r.outcome for r in again} == {ActionOutcome.ALREADY_RETRIED}
    assert {r.shared_run_id: r.new_run_id for r in again} == new_runs
    for original in originals[:3]:  # the link is written once per original
        old_ledger = await services.audit.queries.ledger(tenant, shared_run_id=original)
        assert sum(e.event == RETRIED_EVENT for e in old_ledger) == 1
    failed, _ = await bulk.failed.list(tenant, RunFilter(run_ids=(originals[0],)), limit=1)
    assert failed[0].retried_by == new_runs[originals[0]]


async def test_retry_answers_runs_that_did_not_fail_or_are_not_the_callers(rig: Rig) -> None:
    services, hold = rig
    tenant, other = new_tenant("asker"), new_tenant("owner")
    [running] = await _submit(services, tenant, HELD, 1)
    [foreign] = await _submit(services, other, FAILING, 1)
    await _until_done(services, other, [foreign])
    answers = await _bulk(services).retry(tenant, RunFilter(run_ids=(running, foreign)))
    assert [(a.shared_run_id, a.outcome) for a in answers] == [
        (running, ActionOutcome.NOT_FAILED),
        (foreign, ActionOutcome.NOT_FOUND),  # another tenant's run answers like an unknown one
    ]
    hold.release_tenant(tenant.tenant_id)


COMPLETING = parse_pipeline({"name": "completes", "steps": [{"name": "only", "stepKey": "test.noop"}]})


async def test_run_again_makes_one_linked_run_per_request_of_a_finished_run_and_refuses_an_unfinished_one(
    rig: Rig,
) -> None:
    services, hold = rig
    tenant, other = new_tenant("again"), new_tenant("stranger")
    [completed] = await _submit(services, tenant, COMPLETING, 1)
    [running] = await _submit(services, tenant, HELD, 1)
    await _until_done(services, tenant, [completed])
    bulk = _bulk(services)

    first = await bulk.run_again(tenant, completed, "page-1")
    repeated = await bulk.run_again(tenant, completed, "page-1")  # the same click, sent twice
    second = await bulk.run_again(tenant, completed, "page-2")
    unfinished = await bulk.run_again(tenant, running, "page-1")
    foreign = await bulk.run_again(other, completed, "page-1")

    assert (first.outcome, repeated.outcome) == (ActionOutcome.RETRIED, ActionOutcome.ALREADY_RETRIED)
    assert first.new_run_id is not None and repeated.new_run_id == first.new_run_id
    assert second.new_run_id not in (None, first.new_run_id)
    assert unfinished.outcome is ActionOutcome.NOT_FINISHED and unfinished.new_run_id is None
    assert foreign.outcome is ActionOutcome.NOT_FOUND  # another tenant's run answers like an unknown one
    ledger = await services.audit.queries.ledger(tenant, shared_run_id=completed)
    assert [e.attributes["retry.run_id"] for e in ledger if e.event == RETRIED_EVENT] == [
        first.new_run_id,
        second.new_run_id,
    ]
    record = await services.control_plane.parts.runs.get(second.new_run_id or "")
    assert record is not None and record.snapshot is not None and record.pipeline == COMPLETING
    assert record.snapshot.attributes == {RETRY_OF_ATTRIBUTE: completed}
    hold.release_tenant(tenant.tenant_id)


async def test_bulk_cancel_by_filter_touches_only_the_callers_tenant(rig: Rig) -> None:
    services, hold = rig
    tenant_a, tenant_b = new_tenant("alice"), new_tenant("bob")
    runs_a = await _submit(services, tenant_a, HELD, 3)
    runs_b = await _submit(services, tenant_b, HELD, 3)
    bulk = _bulk(services)
    try:
        with pytest.raises(TooManyRunsError):
            await _bulk(services, limit=2).cancel(tenant_a, RunFilter(pipeline="held"))
        answers = await bulk.cancel(tenant_a, RunFilter(pipeline="held"))
        assert sorted(a.shared_run_id for a in answers) == sorted(runs_a)
        assert {a.outcome for a in answers} == {ActionOutcome.CANCELLED}
        for run_id in runs_b:
            view = await services.control_plane.run_status(run_id, tenant_b)
            assert not run_is_done(view) and view.shared_status != "Cancelled"
            assert view.control_status != "CancelRequested"
        foreign = await bulk.cancel(tenant_a, RunFilter(run_ids=(runs_b[0],)))
        assert [a.outcome for a in foreign] == [ActionOutcome.NOT_FOUND]
        hold.release_tenant(tenant_a.tenant_id)  # running steps finish; the runs end Cancelled
        await _until_done(services, tenant_a, runs_a)
        for run_id in runs_a:
            assert run_final_status(await services.control_plane.run_status(run_id, tenant_a)) == "Cancelled"
        assert await bulk.cancel(tenant_a, RunFilter(pipeline="held")) == []  # nothing left to cancel
        repeated = await bulk.cancel(tenant_a, RunFilter(run_ids=tuple(runs_a)))
        assert {a.outcome for a in repeated} == {ActionOutcome.ALREADY_FINISHED}
    finally:
        hold.release_tenant(tenant_a.tenant_id)
        hold.release_tenant(tenant_b.tenant_id)
