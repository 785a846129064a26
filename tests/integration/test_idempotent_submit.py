"""Idempotent submit (issue 15 item 3): one key, one run, whatever the concurrency.

The key is claimed by the same Lua script that creates the shared run, so concurrent
submits with one key (on one control plane, or on two control planes sharing one Redis)
create exactly one SharedRunId and one execution; the others answer that run
(`deduplicated`). Keys are per tenant; a key reused for another request is a typed
conflict that submits nothing; a key is free again once its window ends; a key whose run
finished and left hot state within the window is answered from the run's durable record.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime_core.bootstrap import RuntimeServices
from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import EmbeddedRedis, HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import HotStateRetention
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import IdempotencyConflictError, SharedRunStatus, SubmitMode, SubmitResult
from tests.helpers import CountingExecutor, wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, control_plane, start_instance
from tests.integration.lifecycle_support import finish, lifecycle_runtime

pytestmark = pytest.mark.redis_kinds("single", "cluster")

COUNTED = parse_pipeline({"name": "counted", "steps": [{"name": "only", "stepKey": "test.count"}]})
OTHER_TENANT = ExecutionContextSnapshot(user_id="erin", tenant_id="tenant-idem-b", context_key="test-idem-b")
CONCURRENT_SUBMITS = 50


def _plane(hot_state: HotState, counter: CountingExecutor | None = None, **settings: Any) -> ControlPlane:
    return control_plane(hot_state, counter or CountingExecutor(), **settings)


async def _submit(
    plane: ControlPlane,
    key: str | None,
    *,
    input: dict[str, Any] | None = None,
    mode: SubmitMode = SubmitMode.QUEUE_FIRST,
    snapshot: ExecutionContextSnapshot = DEFAULT_TENANT,
) -> SubmitResult:
    return await plane.submit(COUNTED, input or {"n": 1}, mode, snapshot, idempotency_key=key)


async def _tenant_run_ids(plane: ControlPlane, tenant_id: str) -> list[str]:
    return [run.shared_run_id for run in await plane.parts.runs.list_tenant(tenant_id, limit=1_000)]


async def _executed_once(plane: ControlPlane, counter: CountingExecutor, shared_run_id: str) -> None:
    """Drain until the run's local run is closed; exactly one execution ran its step once."""

    async def finished() -> bool:
        await plane.drain(10, DEFAULT_TENANT)
        local = await plane.parts.index.get_by_shared(shared_run_id)
        return local is not None and local.status.is_terminal

    await wait_until(finished, timeout=20, interval=0.02)
    assert len(counter.calls) == 1 and sum(counter.calls.values()) == 1


@pytest.mark.parametrize("mode", [SubmitMode.QUEUE_FIRST, SubmitMode.DIRECT_DISPATCH])
async def test_fifty_concurrent_identical_submits_with_one_key_make_one_run_and_one_execution(
    hot_state: HotState, mode: SubmitMode
) -> None:
    counter = CountingExecutor()
    plane = _plane(hot_state, counter)
    await start_instance(plane)
    try:
        results = await asyncio.gather(
            *(_submit(plane, "order-42", mode=mode) for _ in range(CONCURRENT_SUBMITS))
        )
        run_ids = {result.shared_run_id for result in results}
        assert len(run_ids) == 1
        assert sum(not result.deduplicated for result in results) == 1
        assert await _tenant_run_ids(plane, DEFAULT_TENANT.tenant_id) == list(run_ids)
        await _executed_once(plane, counter, run_ids.pop())
    finally:
        await plane.stop()


async def test_concurrent_submits_with_one_key_on_two_control_planes_make_one_run(
    hot_state: HotState,
) -> None:
    counter = CountingExecutor()
    planes = [_plane(hot_state, counter, host=f"idem-{n}") for n in (1, 2)]
    await start_instance(planes[0])
    try:
        results = await asyncio.gather(
            *(_submit(planes[n % 2], "shared-key") for n in range(CONCURRENT_SUBMITS))
        )
        run_ids = {result.shared_run_id for result in results}
        assert len(run_ids) == 1 and sum(not r.deduplicated for r in results) == 1
        await _executed_once(planes[0], counter, run_ids.pop())
    finally:
        for plane in planes:
            await plane.stop()


async def test_a_repeated_submit_answers_the_runs_current_state(hot_state: HotState) -> None:
    plane = _plane(hot_state)
    await start_instance(plane)
    try:
        first = await _submit(plane, "again")
        await plane.drain(10, DEFAULT_TENANT)
        again = await _submit(plane, "again")
        assert again.deduplicated and again.shared_run_id == first.shared_run_id
        assert first.status is SharedRunStatus.QUEUED_GLOBALLY
        assert again.status is SharedRunStatus.DISPATCHED and again.local_run_id is not None
    finally:
        await plane.stop()


async def test_the_same_key_in_another_tenant_is_independent(hot_state: HotState) -> None:
    plane = _plane(hot_state)
    try:
        ours = await _submit(plane, "tenant-scoped")
        theirs = await _submit(plane, "tenant-scoped", snapshot=OTHER_TENANT)
        assert ours.shared_run_id != theirs.shared_run_id
        assert not ours.deduplicated and not theirs.deduplicated
        assert await _tenant_run_ids(plane, OTHER_TENANT.tenant_id) == [theirs.shared_run_id]
    finally:
        await plane.stop()


@pytest.mark.parametrize("mode", [SubmitMode.QUEUE_FIRST, SubmitMode.DIRECT_DISPATCH])
async def test_a_key_reused_for_a_different_input_is_a_conflict_that_submits_nothing(
    hot_state: HotState, mode: SubmitMode
) -> None:
    plane = _plane(hot_state)
    try:
        first = await _submit(plane, "reused", mode=mode)
        before = await _tenant_run_ids(plane, DEFAULT_TENANT.tenant_id)
        with pytest.raises(IdempotencyConflictError) as refused:
            await _submit(plane, "reused", input={"n": 2}, mode=mode)
        assert refused.value.code == "idempotency_conflict"
        assert "different pipeline or input" in refused.value.message
        assert first.shared_run_id in refused.value.message
        assert await _tenant_run_ids(plane, DEFAULT_TENANT.tenant_id) == before
    finally:
        await plane.stop()


async def test_a_key_is_free_again_once_its_window_ends(hot_state: HotState) -> None:
    plane = _plane(hot_state, idempotency_window_ms=300)
    try:
        first = await _submit(plane, "short-window")
        key = plane.parts.queue.keys.of_tenant(DEFAULT_TENANT.tenant_id).idempotency(
            DEFAULT_TENANT.tenant_id, "short-window"
        )
        assert 0 < await hot_state.redis.pttl(key) <= 300

        async def expired() -> bool:
            return not await hot_state.redis.exists(key)

        await wait_until(expired, timeout=5)
        second = await _submit(plane, "short-window")
        assert second.shared_run_id != first.shared_run_id and not second.deduplicated
    finally:
        await plane.stop()


async def test_submits_without_a_key_are_never_deduplicated(hot_state: HotState) -> None:
    plane = _plane(hot_state)
    try:
        results = [await _submit(plane, None) for _ in range(3)]
        assert len({result.shared_run_id for result in results}) == 3
    finally:
        await plane.stop()


async def test_a_key_whose_finished_run_left_hot_state_is_answered_from_its_durable_record(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    hot = HotStateRetention(enabled=False, grace_ms=0, record_retention_ms=200)
    settings = lifecycle_runtime(redis_server.url, tmp_path, hot, background_pump=False)
    async with RuntimeServices(settings) as services:
        services.executors.register(CountingExecutor())
        plane = services.control_plane
        first = await _submit(plane, "archived")
        view = await finish(plane, first.shared_run_id, DEFAULT_TENANT)
        assert plane.parts.lifecycle.sweeper is not None
        await plane.parts.lifecycle.sweeper.sweep_once()

        async def record_gone() -> bool:
            return await plane.parts.runs.get(first.shared_run_id) is None

        await wait_until(record_gone, timeout=10)
        again = await _submit(plane, "archived")
    assert again.deduplicated and again.shared_run_id == first.shared_run_id
    assert again.local_run_id == view.local_run_id and again.status is SharedRunStatus.DISPATCHED


async def test_a_retry_that_finds_the_run_its_lost_call_made_records_the_submission_once(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """The first call created the run but never journaled it (its control plane lost Redis's
    reply, or died, before it could): the client's retry on another control plane answers that
    run and writes its `shared_run.submitted` entry; the next retry adds none."""
    hot = HotStateRetention(enabled=False)
    settings = lifecycle_runtime(redis_server.url, tmp_path, hot, background_pump=False)
    async with RuntimeServices(settings) as services:
        services.executors.register(CountingExecutor())
        silent = _plane(services.hot_state)  # a control plane that journals nothing
        first = await _submit(silent, "lost-reply")
        retries = [await _submit(services.control_plane, "lost-reply") for _ in range(2)]
        await services.audit.ledger.flush()
        entries = await services.durable_store.list_ledger(
            DEFAULT_TENANT.tenant_id, shared_run_id=first.shared_run_id
        )
    assert all(r.deduplicated and r.shared_run_id == first.shared_run_id for r in retries)
    [submitted] = [e for e in entries if e.event == "shared_run.submitted"]
    assert submitted.attributes["user.id"] == DEFAULT_TENANT.user_id
